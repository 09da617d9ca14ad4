"""The scheduled drift evaluation end to end: hourly rollups -> detectors -> alerts."""

import datetime as dt

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
