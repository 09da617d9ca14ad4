"""The alerts and ingest health figures, and the evidence they are drawn from (pure: no database)."""

from __future__ import annotations

import datetime as dt
import json

from dashboard.charts.alerts import alert_evidence_figure
from dashboard.charts.health import ingest_health_figure
from dashboard.models import Alert
from dashboard.selectors.alerts import evidence_of, format_number
from dashboard.selectors.health import health_step, ingest_health_from_rows

HOSTILE = "<script>alert(1)</script><b>x</b>"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def hourly(hours: int = 6) -> list[dict]:
    return [
        {
            "start": (NOW - (hours - i) * HOUR).isoformat(), "calls": 100 + i,
            "error_rate": 0.03, "retry_rate": 0.05 * (i + 1), "escalation_rate": 0.01 if i % 2 else None,
        }  # fmt: skip
        for i in range(hours)
    ]


def stored_evidence(**changes) -> dict:
    """Evidence as dashboard.alerting.evaluation stores it."""
    evidence = {
        "statistics": {
            "evaluated": True, "mode": "open", "window_hours": 2, "recent_calls": 2480, "recent_retry_rate": 0.42,
            "baseline_retry_rate": 0.08, "retry_z": 9.713, "retry_p": 1.2e-22, "error_flat": True,
            "thresholds": {"z_open": 4.5, "min_rise": 1.5},
        },  # fmt: skip
        "recent": [(NOW - 2 * HOUR).isoformat(), NOW.isoformat()],
        "baseline": [(NOW - 6 * HOUR).isoformat(), (NOW - 4 * HOUR).isoformat()],
        "hourly": hourly(),
        "sample_trace_ids": ["4bf92f3577b34da6a3ce929d0e0e4736"],
    }
    evidence.update(changes)
    return evidence


def alert_with(evidence) -> Alert:
    return Alert(pk=7, tool="lookup", kind="retry_rise_flat_error", evidence=evidence)


def test_evidence_is_read_as_the_evaluation_stores_it():
    evidence = evidence_of(alert_with(stored_evidence()))

    assert (evidence.recent.start, evidence.recent.end) == (NOW - 2 * HOUR, NOW)
    assert evidence.baseline.end == NOW - 4 * HOUR
    assert len(evidence.points) == 6
    assert evidence.sample_trace_ids == ["4bf92f3577b34da6a3ce929d0e0e4736"]
    statistics = {row.name: row.value for row in evidence.statistics}
    assert statistics["recent_calls"] == "2,480"
    assert statistics["retry_p"] == "1.20e-22"
    assert statistics["error_flat"] == "yes"
    assert "thresholds" not in statistics
    assert {row.name: row.value for row in evidence.thresholds} == {"z_open": "4.5", "min_rise": "1.5"}


def test_evidence_windows_written_as_objects_and_points_under_chart_are_read_too():
    evidence = evidence_of(
        alert_with(
            {
                "recent": {"start": "2026-11-29T11:00:00+00:00", "end": "2026-11-29T12:00:00Z", "calls": 840},
                "chart": hourly(3),
            }
        )
    )

    assert evidence.recent.end == NOW
    assert evidence.baseline is None
    assert len(evidence.points) == 3


def test_malformed_evidence_is_left_out_rather_than_failing_the_page():
    junk = {"recent": ["yesterday", 3], "statistics": [1, 2], "hourly": [{"start": "nope"}, 5], "sample_trace_ids": "x"}
    evidence = evidence_of(alert_with(junk))

    assert (evidence.recent, evidence.statistics, evidence.points, evidence.sample_trace_ids) == (None, [], [], [])
    assert evidence_of(alert_with(None)).points == []


def test_numbers_are_formatted_for_people():
    assert [format_number(v) for v in (True, 12345, 0.123456, 0.00001, None, [0.5, 2])] == [
        "yes", "12,345", "0.1235", "1.00e-05", "—", "0.5, 2",
    ]  # fmt: skip


def test_the_evidence_chart_draws_the_rates_and_shades_the_baseline_and_the_recent_window():
    evidence = evidence_of(alert_with(stored_evidence()))
    figure = alert_evidence_figure(evidence, kind="retry_rise_flat_error", tool="lookup")

    names = [trace["name"] for trace in figure["data"]]
    assert names == ["calls", "error rate", "retries per call", "escalation rate"]
    widths = {trace["name"]: trace["line"]["width"] for trace in figure["data"] if trace["type"] == "scatter"}
    assert widths["retries per call"] > widths["escalation rate"]  # the kind's own rates stand out
    shapes = figure["layout"]["shapes"]
    assert [(s["x0"], s["x1"]) for s in shapes] == [
        ("2026-11-29T06:00:00Z", "2026-11-29T08:00:00Z"),  # baseline
        ("2026-11-29T10:00:00Z", "2026-11-29T12:00:00Z"),  # recent
    ]
    assert [a["text"] for a in figure["layout"]["annotations"]] == ["baseline", "recent"]
    assert figure["data"][3]["y"][0] is None  # an hour without calls is a gap, not a zero


def test_the_evidence_chart_escapes_the_tool_name():
    figure = alert_evidence_figure(evidence_of(alert_with(stored_evidence())), kind="error_rate_spike", tool=HOSTILE)

    dumped = json.dumps(figure)
    assert "<script>" not in dumped and "<b>x" not in dumped
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in dumped


def test_there_is_no_evidence_chart_without_hourly_points():
    assert alert_evidence_figure(evidence_of(alert_with({})), kind="error_rate_spike", tool="t") is None


# --- ingest health ----------------------------------------------------------------------------


def rows() -> list[dict]:
    return [
        {"hour": NOW - 2 * HOUR, "outcome": "accepted", "reason": "", "total": 900},
        {"hour": NOW - 2 * HOUR, "outcome": "rejected", "reason": "span too old", "total": 4},
        {"hour": NOW, "outcome": "accepted", "reason": "", "total": 100},
        {"hour": NOW, "outcome": "duplicate", "reason": "", "total": 7},
        {"hour": NOW, "outcome": "refused", "reason": HOSTILE, "total": 2},
        {"hour": NOW, "outcome": "rejected", "reason": "span too old", "total": 1},
    ]


def test_ingest_health_zero_fills_every_hour_and_totals_each_outcome():
    health = ingest_health_from_rows(rows(), NOW - 3 * HOUR + dt.timedelta(minutes=30), NOW + dt.timedelta(minutes=5))

    assert health.hours == [NOW - 3 * HOUR, NOW - 2 * HOUR, NOW - HOUR, NOW]
    assert health.series["accepted"] == [0, 900, 0, 100]
    assert health.totals == {"accepted": 1000, "duplicate": 7, "rejected": 5, "refused": 2}
    reasons = [(r.outcome, r.reason, r.count) for r in health.reasons]
    assert reasons == [("rejected", "span too old", 5), ("refused", HOSTILE, 2)]
    assert not health.is_empty


def test_ingest_health_without_rows_is_empty():
    assert ingest_health_from_rows([], NOW - HOUR, NOW).is_empty


def test_the_ingest_chart_has_one_trace_per_outcome_and_escapes_reasons_in_its_hover_text():
    figure = ingest_health_figure(ingest_health_from_rows(rows(), NOW - 3 * HOUR, NOW + HOUR))

    assert [trace["name"] for trace in figure["data"]] == [
        "accepted spans", "duplicate spans", "rejected spans", "refused requests",
    ]  # fmt: skip
    refused = figure["data"][3]
    assert refused["y"] == [0, 0, 0, 2]
    assert refused["hovertext"][3] == "2 × &lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"
    assert "<script>" not in json.dumps(figure)


def test_the_evidence_chart_shows_rates_as_percentages_as_every_page_does():
    figure = alert_evidence_figure(evidence_of(alert_with(stored_evidence())), kind="retry_rise_flat_error", tool="x")

    assert figure["layout"]["yaxis"]["tickformat"] == ".1~%"
    rates = [trace for trace in figure["data"] if trace["type"] == "scatter"]
    assert rates and all("%{y:.1%}" in trace["hovertemplate"] for trace in rates)


def test_the_evidence_charts_calls_axis_ticks_whole_numbers_of_its_own():
    figure = alert_evidence_figure(evidence_of(alert_with(stored_evidence())), kind="retry_rise_flat_error", tool="x")
    calls = figure["layout"]["yaxis2"]

    assert calls["tickformat"] == ",d"
    assert calls["tickmode"] == "auto"  # not synced to the rate axis's gridlines (47.3, 94.5, ...)
    assert calls["range"] == [0, 3 * 105]


def test_the_ingest_chart_draws_its_dates_once_under_the_lower_panel_and_counts_in_whole_numbers():
    layout = ingest_health_figure(ingest_health_from_rows(rows(), NOW - 3 * HOUR, NOW + HOUR))["layout"]

    assert layout["xaxis"]["anchor"] == "y2"
    assert layout["yaxis2"]["domain"][1] < layout["yaxis"]["domain"][0]
    assert layout["yaxis2"]["tickformat"] == layout["yaxis"]["tickformat"] == ",d"
    assert layout["yaxis2"]["dtick"] == 1  # two refusals: 0, 1, 2, not 0.5 steps


def test_a_short_range_of_ingest_health_is_drawn_at_five_minutes_not_as_a_ramp_between_two_hours():
    start, end = NOW - HOUR, NOW
    step = health_step(start, end)
    rows = [{"hour": NOW - dt.timedelta(minutes=10), "outcome": "accepted", "reason": "", "total": 7}]
    report = ingest_health_from_rows(rows, start, end, step)

    assert step == 300 and len(report.hours) in (12, 13)
    assert sum(report.series["accepted"]) == 7 and report.series["accepted"].count(7) == 1
    assert health_step(NOW - 24 * HOUR, NOW) == 3600
    # Hourly for long ranges: five-minute rows sum into their hour.
    hourly = ingest_health_from_rows(rows * 2, NOW - 24 * HOUR, NOW)
    assert sum(hourly.series["accepted"]) == 14 and hourly.series["accepted"].count(14) == 1
