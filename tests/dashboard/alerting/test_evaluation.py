"""The scheduled drift evaluation end to end: hourly rollups -> detectors -> alerts."""

import datetime as dt
import json

import pytest

from dashboard import drift
from dashboard.alerting.evaluation import drift_evaluate, thresholds_for
from dashboard.models import Alert, ToolRollup
from demo import scenarios
from tests.factories import make_project

pytestmark = pytest.mark.django_db


def store(project, scenario, *, resolution: int = 3600, series=None) -> None:
    ToolRollup.objects.bulk_create(
        [
            ToolRollup(
                project=project, resolution=resolution, bucket_start=bucket.start, tool=tool, service="svc",
                calls=bucket.calls, attempts=bucket.calls + bucket.retries, errors=bucket.errors,
                retries=bucket.retries, escalations=bucket.escalations, wasted_retries=bucket.wasted_retries,
                failed_retries=bucket.failed_retries, resolved=bucket.calls - bucket.errors,
            )  # fmt: skip
            for tool, buckets in (series or scenario.series).items()
            for bucket in buckets
        ],
        batch_size=2000,
    )


def run_hourly(project, start: dt.datetime, end: dt.datetime) -> None:
    moment = start
    while moment <= end:
        drift_evaluate(project_id=project.pk, now=moment)
        moment += dt.timedelta(hours=1)


def test_a_retry_ramp_with_flat_errors_opens_one_alert_with_its_evidence_on_that_tool_only():
    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)

    run_hourly(project, expected.onset, expected.deadline + dt.timedelta(hours=2))

    alerts = list(Alert.objects.filter(project=project))
    assert [(a.tool, a.kind, a.status) for a in alerts] == [(expected.tool, "retry_rise_flat_error", "open")]
    alert = alerts[0]
    # The job opens it exactly when the detectors' own hourly replay does.
    replayed = drift.replay(scenario.series[expected.tool], expected.onset - dt.timedelta(hours=1), alert.opened_at)
    assert [(e.kind, e.opened) for e in replayed.episodes] == [("retry_rise_flat_error", alert.opened_at)]
    assert alert.opened_at <= expected.deadline + dt.timedelta(hours=2)
    assert alert.evidence["statistics"] and alert.evidence["hourly"] and alert.summary
    assert {"recent", "baseline", "sample_trace_ids"} <= alert.evidence.keys()


def test_thresholds_layer_project_then_tool_overrides():
    project = make_project(drift_thresholds={"*": {"min_rise": 2.0}, "search": {"min_recent_calls": 5}})

    assert thresholds_for(project, "search").min_rise == 2.0
    assert thresholds_for(project, "search").min_recent_calls == 5
    assert thresholds_for(project, "other").min_recent_calls != 5


def test_off_the_hour_the_job_judges_windows_ending_at_now_from_the_5_minute_rollups():
    # Seed 2: the step comes at 15:06; by 16:00 the hour holds 54 minutes of it, too little.
    scenario = scenarios.generate("s5_retry_step", 2, fine=True)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)
    # The scenario's quarter hours stand in for the 5-minute rollups: windows end on quarters.
    store(project, scenario, resolution=300, series=scenario.fine_series)
    quarter = dt.timedelta(minutes=15)
    replayed = drift.replay(
        scenario.series[expected.tool], expected.onset - dt.timedelta(hours=1), expected.deadline,
        fine_series=scenario.fine_series[expected.tool], step=quarter,
    )  # fmt: skip
    (episode,) = replayed.episodes
    assert episode.opened.minute != 0  # caught between two hourly runs

    moment = expected.onset.replace(minute=0, second=0, microsecond=0) + dt.timedelta(minutes=3)
    while moment <= episode.opened + scenarios.EVALUATION_LAG:
        drift_evaluate(project_id=project.pk, now=moment)  # as the job does: at :03, :18, :33, :48
        moment += quarter

    alerts = list(Alert.objects.filter(project=project))
    assert [(a.tool, a.kind) for a in alerts] == [(expected.tool, "retry_rise_flat_error")]
    assert alerts[0].opened_at == episode.opened + scenarios.EVALUATION_LAG
    assert alerts[0].opened_at <= expected.onset + dt.timedelta(hours=2)
    recent = [dt.datetime.fromisoformat(moment) for moment in alerts[0].evidence["recent"]]
    assert recent[1] == episode.opened  # the window ends at the quarter, not at the hour
    # The failed retries are read: the rescued calls are fewer than the retries.
    statistics = alerts[0].evidence["statistics"]
    assert 0 < statistics["recent_rescued"] < statistics["recent_retries"]


def test_an_alert_keeps_the_evidence_and_the_sentence_of_the_evaluation_that_opened_it():
    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)
    run_hourly(project, expected.onset, expected.deadline + dt.timedelta(hours=2))
    alert = Alert.objects.get(project=project)
    opening, sentence = alert.opening_evidence, alert.summary

    run_hourly(project, alert.opened_at + dt.timedelta(hours=3), alert.opened_at + dt.timedelta(hours=4))

    alert.refresh_from_db()
    assert alert.opening_evidence == opening and alert.summary == sentence
    assert sentence.startswith(f"Retry rate of {expected.tool} rose from ") and " % of calls (" in sentence
    assert opening["statistics"]["mode"] == "open" and opening["statistics"]["evaluated"]
    # The latest evaluation judges recovery; its own line is in the latest evidence.
    assert alert.evidence["statistics"]["mode"] == "hold"
    assert alert.evidence["summary"] and alert.evidence["evaluated_at"] != opening["evaluated_at"]


def test_the_chart_points_cover_the_whole_baseline_one_per_hour_with_gaps_as_none():
    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    gap = expected.onset - dt.timedelta(days=3)  # an hour without calls inside the baseline
    series = {tool: [b for b in buckets if b.start != gap] for tool, buckets in scenario.series.items()}
    project = make_project()
    store(project, scenario, series=series)
    run_hourly(project, expected.onset, expected.deadline + dt.timedelta(hours=2))

    evidence = Alert.objects.get(project=project).opening_evidence
    starts = [dt.datetime.fromisoformat(point["start"]) for point in evidence["hourly"]]
    baseline = [dt.datetime.fromisoformat(moment) for moment in evidence["baseline"]]
    recent = [dt.datetime.fromisoformat(moment) for moment in evidence["recent"]]
    assert starts[0] == baseline[0] and starts[-1] == recent[1] - dt.timedelta(hours=1)
    assert all(b - a == dt.timedelta(hours=1) for a, b in zip(starts, starts[1:]))
    hole = evidence["hourly"][starts.index(gap)]
    assert hole["calls"] == 0 and hole["retry_rate"] is None and hole["error_rate"] is None


def test_a_range_evaluation_opens_alerts_at_the_hours_they_would_have_opened_once():
    from dashboard.alerting.evaluation import drift_evaluate_range

    scenario = scenarios.generate("s6_recovery", 3)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)  # all of it arrives at once, after the fact: nothing was judged
    since, until = expected.onset - dt.timedelta(hours=6), expected.resolve_deadline + dt.timedelta(hours=6)
    replayed = drift.replay(scenario.series[expected.tool], since, until)
    episodes = [(e.kind, e.opened, e.resolved) for e in replayed.episodes]
    assert ("retry_rise_flat_error", episodes[0][1], episodes[0][2]) in episodes and episodes[0][2] is not None

    made = drift_evaluate_range(project_id=project.pk, since=since, until=until)

    alerts = list(Alert.objects.filter(project=project, tool=expected.tool).order_by("opened_at"))
    assert [(a.kind, a.opened_at, a.resolved_at) for a in alerts] == episodes
    assert alerts[0].status == "resolved" and alerts[0].resolved_by == "auto"
    assert alerts[0].summary.startswith(f"Retry rate of {expected.tool} rose from")
    assert not alerts[0].deliveries.exists()  # over already: recorded, not announced
    assert len(made) == Alert.objects.filter(project=project).count()
    # Again, or over a wider range: what was alerted is not alerted again.
    assert drift_evaluate_range(project_id=project.pk, since=since - dt.timedelta(hours=3), until=until) == []


def test_a_range_evaluation_does_not_re_alert_what_the_job_already_alerted():
    from dashboard.alerting.evaluation import drift_evaluate_range

    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)
    run_hourly(project, expected.onset, expected.deadline + dt.timedelta(hours=2))
    (alert,) = Alert.objects.filter(project=project)

    made = drift_evaluate_range(project_id=project.pk, since=expected.onset - dt.timedelta(hours=12),
                                until=expected.deadline)  # fmt: skip

    assert [a for a in made if a.tool == expected.tool] == []
    assert Alert.objects.filter(project=project, tool=expected.tool).count() == 1
    alert.refresh_from_db()
    assert alert.status == "open"


def _backfilled_step(*, fine: bool = True):
    # Seed 50: the step comes at 04:41. Judged on whole hours it opens at 07:00, past its 2 h.
    scenario = scenarios.generate("s5_retry_step", 50, fine=True)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)
    if fine:  # the scenario's quarter hours stand in for the 5-minute rollups
        store(project, scenario, resolution=300, series=scenario.fine_series)
    since = expected.onset.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=6)
    return scenario, expected, project, since, since + dt.timedelta(hours=12)


def test_a_range_evaluation_opens_a_backfilled_step_at_the_quarter_hour_the_job_would_have():
    from dashboard.alerting.evaluation import drift_evaluate_range

    scenario, expected, live, since, until = _backfilled_step()
    quarter = dt.timedelta(minutes=15)
    moment = since + scenarios.EVALUATION_LAG
    while moment <= expected.onset + dt.timedelta(hours=2):  # the job, had the spans come in time
        drift_evaluate(project_id=live.pk, now=moment)
        moment += quarter
    (job,) = Alert.objects.filter(project=live)
    _, _, project, _, _ = _backfilled_step()

    made = drift_evaluate_range(project_id=project.pk, since=since, until=until, now=until + dt.timedelta(hours=3))

    assert [(a.tool, a.kind) for a in made] == [(expected.tool, "retry_rise_flat_error")] == [(job.tool, job.kind)]
    alert = made[0]
    assert alert.opened_at == job.opened_at - scenarios.EVALUATION_LAG  # the job runs 3 minutes after its quarter
    assert alert.opened_at <= expected.deadline and alert.opened_at.minute != 0
    assert alert.evidence["recent"] == job.opening_evidence["recent"]  # the same windows, ending at that quarter
    assert alert.evidence["statistics"] == job.opening_evidence["statistics"]
    assert drift_evaluate_range(project_id=project.pk, since=since, until=until, now=until) == []  # once


def test_a_range_past_the_5_minute_rollups_horizon_is_judged_hourly():
    from dashboard.alerting.evaluation import drift_evaluate_range

    _, expected, project, since, until = _backfilled_step(fine=False)
    hourly = drift.replay(drift.HourlySeries(scenarios.generate("s5_retry_step", 50, fine=True).series[expected.tool]),
                          since, until)  # fmt: skip
    # Four days on, the 5-minute rows of those hours were never written (dashboard/rollups/refresh.py).
    (alert,) = drift_evaluate_range(project_id=project.pk, since=since, until=until, now=until + dt.timedelta(days=4))

    assert alert.opened_at == hourly.episodes[0].opened == since + dt.timedelta(hours=9)  # 07:00, not 06:15


def test_the_evaluate_drift_command_evaluates_a_range_and_says_what_it_opened():
    from io import StringIO

    from django.core.management import call_command

    scenario = scenarios.generate("s6_recovery", 3)
    expected = scenario.expected[0]
    project = make_project()
    store(project, scenario)
    out = StringIO()
    since = (expected.onset - dt.timedelta(hours=6)).isoformat()
    until = (expected.resolve_deadline + dt.timedelta(hours=6)).isoformat()

    call_command("evaluate_drift", "--project", project.slug, "--since", since, "--until", until, stdout=out)

    assert Alert.objects.filter(project=project, tool=expected.tool, kind="retry_rise_flat_error").count() == 1
    assert f"retry_rise_flat_error on {expected.tool}" in out.getvalue()


def test_queued_buckets_for_past_hours_give_the_hours_whose_windows_hold_them():
    from dashboard.alerting.evaluation import backfilled_range
    from ingest.models import ChangedBucket

    project = make_project()
    now = dt.datetime(2025, 1, 20, 12, 7, tzinfo=dt.UTC)
    ChangedBucket.objects.create(project=project, bucket_start=dt.datetime(2025, 1, 20, 11, 55, tzinfo=dt.UTC))
    assert backfilled_range(project_id=project.pk, now=now) is None  # the job judges these itself

    for start in (dt.datetime(2025, 1, 13, 9, 5, tzinfo=dt.UTC), dt.datetime(2025, 1, 14, 2, 40, tzinfo=dt.UTC)):
        ChangedBucket.objects.create(project=project, bucket_start=start)

    since, until = backfilled_range(project_id=project.pk, now=now)
    assert since == dt.datetime(2025, 1, 13, 9, tzinfo=dt.UTC)
    assert until == dt.datetime(2025, 1, 14, 9, tzinfo=dt.UTC)  # 2:00 + the 6 h windows + 1 h


def test_notices_carry_the_opening_sentence_and_an_absolute_link_to_the_alert_page(settings):
    from django.utils import timezone

    from dashboard.alerting.transports import email_body, notice_build, slack_payload, webhook_payload
    from dashboard.models import AlertChannel, Delivery

    settings.TOOLWATCH_BASE_URL = "https://toolwatch.example.com"
    scenario = scenarios.generate("s2_retry_ramp", 4)
    expected = scenario.expected[0]
    project = make_project()
    AlertChannel.objects.create(project=project, kind="email", name="ops", target="ops@example.com")
    store(project, scenario)
    run_hourly(project, expected.onset, expected.deadline + dt.timedelta(hours=2))
    delivery = Delivery.objects.select_related("alert", "channel__project").get(event="opened")

    notice = notice_build(delivery=delivery, now=timezone.now())

    url = f"https://toolwatch.example.com/p/{project.slug}/alerts/{delivery.alert_id}/"
    sentence = delivery.alert.summary
    assert sentence.startswith(f"Retry rate of {expected.tool} rose from ")
    assert sentence in email_body(notice) and f"Alert page: {url}" in email_body(notice)
    assert webhook_payload(notice)["alert"]["url"] == url
    assert url in json.dumps(slack_payload(notice))
