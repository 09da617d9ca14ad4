"""Figure builders are pure: shapes, colours, escaping and size, without a database."""

import datetime as dt
import json
import re

from dashboard.charts.base import CLASS_COLOURS, METRIC_COLOURS, count_axis, text
from dashboard.charts.tools import (
    RATE_MIN_SPAN,
    classes_figure,
    latency_figure,
    rate_figure,
    sparkline_path,
    volume_figure,
)
from dashboard.selectors.tools import bucket_seconds_for
from ingest.taxonomy import ERROR_CLASSES

HOSTILE = '<script>alert(1)</script><b>x</b>'
START = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)


def points(n=5, step=dt.timedelta(hours=1)):
    out = []
    for i in range(n):
        point = {
            "start": START + i * step, "calls": 100 + i, "attempts": 120 + i, "error_rate": 0.123456789,
            "retry_rate": 0.2, "escalation_rate": 0.01, "p50_ms": 12.3456, "p95_ms": 250.0, "p99_ms": 999.0,
            **{f"err_{name}": 0 for name in ERROR_CLASSES},
        }  # fmt: skip
        point["err_transient"] = 3
        point["err_permission"] = i
        out.append(point)
    return out


def band(n=5):
    return [{"baseline": 0.1, "low": 0.05, "high": 0.15}] * (n - 1) + [None]


def test_text_escapes_plotly_pseudo_html():
    assert text(HOSTILE) == "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;"


def test_a_rate_figure_draws_the_rate_over_its_baseline_band():
    figure = rate_figure(points(), band(), metric="retry_rate", tool="search")

    low, high, baseline, rate = figure["data"]
    assert high["fill"] == "tonexty" and high["y"][:1] == [0.15] and len(low["y"]) == 4  # the last step has no band
    assert baseline["y"][0] == 0.1 and baseline["line"]["dash"] == "dot"
    assert rate["line"]["color"] == METRIC_COLOURS["retry_rate"]
    assert rate["x"][0] == "2026-08-01T00:00:00Z"
    assert figure["layout"]["yaxis"]["tickformat"] == ".1~%"


def test_a_rate_figure_without_a_baseline_draws_the_rate_alone():
    figure = rate_figure(points(), [None] * 5, metric="error_rate", tool="search")

    assert [trace["name"] for trace in figure["data"]] == ["Error rate, search"]
    assert figure["data"][0]["y"][0] == 0.12346  # rounded: smaller JSON


def test_tool_names_are_escaped_in_trace_names():
    figures = [
        rate_figure(points(), band(), metric="error_rate", tool=HOSTILE),
        volume_figure(points(), tool=HOSTILE),
    ]

    for figure in figures:
        dumped = json.dumps(figure)
        assert "<script>" not in dumped and "<b>" not in dumped
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;" in dumped


def test_errors_by_class_stack_in_the_class_colours_showing_only_classes_seen():
    figure = classes_figure(points())

    assert figure["layout"]["barmode"] == "stack"
    assert [trace["name"] for trace in figure["data"]] == ["transient", "permission"]
    assert [trace["marker"]["color"] for trace in figure["data"]] == [
        CLASS_COLOURS["transient"], CLASS_COLOURS["permission"]
    ]
    assert figure["data"][1]["y"] == [0, 1, 2, 3, 4]


def test_latency_draws_three_percentiles_in_ms():
    figure = latency_figure(points())

    assert [trace["name"] for trace in figure["data"]] == ["p50", "p95", "p99"]
    assert figure["data"][0]["y"][0] == 12.35
    assert figure["layout"]["yaxis"]["ticksuffix"] == " ms"


def test_every_figure_of_a_90_day_range_stays_small():
    step = bucket_seconds_for(START, START + dt.timedelta(days=90))
    ninety_days = points(n=int(90 * 86400 / step) + 1, step=dt.timedelta(seconds=step))
    figures = [
        rate_figure(ninety_days, band(len(ninety_days)), metric="error_rate", tool="search"),
        volume_figure(ninety_days, tool="search"),
        classes_figure(ninety_days),
        latency_figure(ninety_days),
    ]

    for figure in figures:
        assert len(json.dumps(figure)) < 200_000


def test_a_sparkline_is_a_path_of_numbers_broken_where_quiet():
    path = sparkline_path([0.1, 0.2, None, 0.0, 0.2], width=100, height=20, pad=0)

    assert re.fullmatch(r"[MLh0-9., -]+", path)
    assert path.split(" ") == ["M0.0,10.0", "L25.0,0.0", "M75.0,20.0", "L100.0,0.0"]


def test_a_sparkline_of_a_quiet_tool_or_of_one_point_is_empty_not_a_stray_dot():
    assert sparkline_path([None, None]) == ""
    assert sparkline_path([None, 0.5]) == ""  # one point is no trend: the page says so in words
    assert sparkline_path([0.0, 0.0])  # all zero: a flat line at the bottom, not a division by zero


def test_the_baseline_band_is_filled_per_run_of_steps_so_no_wedge_spans_a_gap():
    gapped = [{"baseline": 0.1, "low": 0.05, "high": 0.15}] * 2 + [None] * 2 + [{"baseline": 0.2, "low": 0.1, "high": 0.3}]
    figure = rate_figure(points(), gapped, metric="error_rate", tool="search")

    fills = [trace for trace in figure["data"] if trace.get("fill") == "tonexty"]
    assert [len(trace["x"]) for trace in fills] == [2, 1]
    assert all(None not in trace["y"] for trace in figure["data"] if trace["name"] in ("band low", "baseline band"))
    assert [trace["showlegend"] for trace in fills] == [True, False]
    baseline, rate = figure["data"][-2:]
    assert baseline["y"][2:4] == [None, None] and baseline["connectgaps"] is False
    assert rate["connectgaps"] is False


def test_every_axis_grows_its_margin_to_fit_its_ticks():
    figures = [
        rate_figure(points(), band(), metric="error_rate", tool="search"),
        volume_figure(points(), tool="search"),
        classes_figure(points()),
        latency_figure(points()),
    ]
    for figure in figures:
        axes = [value for name, value in figure["layout"].items() if name.startswith(("xaxis", "yaxis"))]
        assert axes and all(axis["automargin"] is True for axis in axes)


def test_volume_and_classes_say_what_they_count_calls_or_attempts():
    names = [trace["name"] for trace in volume_figure(points(), tool="search")["data"]]
    assert names == ["logical calls, search", "attempts (spans)"]
    assert "failed calls" in classes_figure(points())["data"][0]["hovertemplate"]


def test_a_count_axis_ticks_whole_numbers_only():
    assert count_axis(2)["tickformat"] == ",d"
    assert (count_axis(2)["tick0"], count_axis(2)["dtick"]) == (0, 1)  # not 0.5 steps
    assert "dtick" not in count_axis(400)  # Plotly's own steps are whole numbers there


def test_errors_by_class_name_even_a_single_class_on_a_whole_number_axis():
    series = points()
    for point in series:
        point["err_permission"] = 0
    figure = classes_figure(series)

    assert [trace["name"] for trace in figure["data"]] == ["transient"]
    assert figure["layout"]["showlegend"] is True
    assert figure["layout"]["yaxis"]["tickformat"] == ",d"
    assert figure["layout"]["yaxis"]["dtick"] == 1


def test_a_rate_that_stays_at_zero_is_drawn_on_0_to_1_percent_not_0_to_100():
    quiet = points()
    for point in quiet:
        point["escalation_rate"] = 0.0
    figure = rate_figure(quiet, [], metric="escalation_rate", tool="lookup")

    assert figure["layout"]["yaxis"]["range"] == [0, RATE_MIN_SPAN]


def test_a_rate_above_the_minimum_span_keeps_plotlys_own_range():
    figure = rate_figure(points(), band(), metric="retry_rate", tool="lookup")

    assert "range" not in figure["layout"]["yaxis"]
