"""The server-drawn SVG previews (dashboard/charts/preview.py) are pure: a figure dict in, markup
out. Read back as XML here: well formed, escaped, and drawing what the figure says."""

import re
import xml.etree.ElementTree as ET

from django.utils.safestring import SafeString

from dashboard.charts.base import band_traces, base_layout, text
from dashboard.charts.health import ingest_health_figure
from dashboard.charts.preview import svg
from dashboard.charts.tools import classes_figure, latency_figure, rate_figure, trend_figure, volume_figure
from dashboard.templatetags.toolwatch import chart_preview
from tests.dashboard.charts.test_charts import band, points

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = ["<script>alert(1)</script>", '"onload=alert(1) x="', "</text><script>alert(2)</script>"]
X = [f"2026-08-01T{hour:02d}:00:00Z" for hour in range(6)]


def parse(markup: str) -> ET.Element:
    # The preview is HTML-embedded SVG without an xmlns; as XML it must still parse, with one.
    return ET.fromstring(markup.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


def drawn(markup: str, tag: str) -> list[ET.Element]:
    return list(parse(markup).iter(SVG + tag))


def line_paths(markup: str) -> list[ET.Element]:
    return [p for p in drawn(markup, "path") if p.get("stroke") and not p.get("stroke-linecap")]


def scatter(y, **extra) -> dict:
    return {"type": "scatter", "mode": "lines", "x": X[: len(y)], "y": y, "line": {"color": "#dc2626"}, **extra}


def test_a_preview_is_an_aria_hidden_svg_that_fills_its_box():
    markup = svg({"data": [scatter([1, 2, 3])], "layout": base_layout()}, width=600, height=260)

    assert isinstance(markup, SafeString)
    root = parse(markup)
    assert root.get("aria-hidden") == "true" and root.get("class") == "chart-preview"
    assert root.get("width") == "100%" and root.get("height") == "260"
    assert "<script" not in markup and "style=" not in markup  # presentation attributes only
    plot = root.find(SVG + "svg")
    assert plot.get("x") == "8.00%" and plot.get("width") == "89.33%"  # the layout's margins, 48 and 16 px of 600


def test_a_line_breaks_at_a_gap_unless_gaps_are_connected():
    broken = line_paths(svg({"data": [scatter([1, None, 2, 3])]}, 600, 260))
    joined = line_paths(svg({"data": [scatter([1, None, 2, 3], connectgaps=True)]}, 600, 260))

    assert broken[0].get("d").count("M") == 2
    assert joined[0].get("d").count("M") == 1
    assert broken[0].get("stroke") == "#dc2626"


def test_markers_are_dots_and_a_dash_is_a_dash_array():
    trace = scatter([1, 2], mode="lines+markers", marker={"size": 3}, line={"dash": "dot", "width": 1})
    markup = svg({"data": [trace]}, 600, 260)

    dots = [p for p in drawn(markup, "path") if p.get("stroke-linecap") == "round"]
    assert dots and dots[0].get("d").count("l0,0") == 2 and dots[0].get("stroke-width") == "3"
    assert line_paths(markup)[0].get("stroke-dasharray") == "3,3"


def test_a_band_is_filled_between_its_low_and_high_traces_per_run():
    low, high, base = [0.1, 0.1, None, 0.1], [0.3, 0.3, None, 0.3], [0.2, 0.2, None, 0.2]
    data = band_traces(X[:4], low, high, base)
    fills = [p for p in drawn(svg({"data": data}, 600, 260), "path") if p.get("fill") not in (None, "none")]

    assert len(fills) == 2  # one per run of points with a baseline: nothing across the gap
    assert all(p.get("d").endswith("Z") and p.get("fill") == "rgba(36, 86, 214, 0.12)" for p in fills)


def test_fills_to_zero_and_to_self():
    for fill in ("tozeroy", "toself"):
        paths = drawn(svg({"data": [scatter([1, 3, 2], fill=fill, fillcolor="#abcdef")]}, 600, 260), "path")
        assert any(p.get("fill") == "#abcdef" and p.get("d").endswith("Z") for p in paths), fill


def bars(markup: str) -> list[list[tuple[float, float, float, float]]]:
    """Each bar trace's bars as (left, top, width, bottom), from its path."""
    shape = r"M(-?[\d.]+),(-?[\d.]+)h(-?[\d.]+)V(-?[\d.]+)h-?[\d.]+Z"
    return [
        [tuple(map(float, bar)) for bar in re.findall(shape, p.get("d"))]
        for p in drawn(markup, "path")
        if p.get("class") == "bars"
    ]


def test_stacked_bars_sit_on_each_other():
    data = [{"type": "bar", "x": X[:2], "y": [2, 1], "marker": {"color": c}} for c in ("#111111", "#222222")]
    first, second = bars(svg({"data": data, "layout": {"barmode": "stack"}}, 600, 260))

    assert len(first) == len(second) == 2
    for below, above in zip(first, second, strict=True):
        assert below[0] == above[0]  # the same slot
        assert abs(above[3] - below[1]) < 0.2  # the second starts where the first ends
        assert below[3] > below[1] and above[3] > above[1]


def test_grouped_bars_sit_side_by_side():
    data = [{"type": "bar", "x": X[:2], "y": [2, 1]}, {"type": "bar", "x": X[:2], "y": [1, 2]}]
    markup = svg({"data": data}, 600, 260)
    first, second = bars(markup)

    assert first[0][0] + first[0][2] <= second[0][0] + 0.1 and first[0][3] == second[0][3]
    fills = [p.get("fill") for p in drawn(markup, "path") if p.get("class") == "bars"]
    assert fills[0] != fills[1]  # Plotly's colourway without a colour


def test_every_string_is_escaped_and_reads_back_as_itself():
    for hostile in HOSTILE:
        # As our figures carry it (through text(): Plotly reads labels as pseudo-HTML), and raw, where tags
        # are dropped as Plotly drops them: either way nothing but text reaches the page.
        safe = text(hostile)
        data = [scatter([1, 2], name=safe), scatter([2, 1], name=safe), scatter([3, 1], name=hostile)]
        layout = base_layout(title={"text": safe}, yaxis={"title": {"text": safe}},
                             annotations=[{"x": X[1], "y": 1, "yref": "paper", "text": safe}])  # fmt: skip
        markup = svg({"data": data, "layout": layout}, 600, 260)

        root = parse(markup)  # well formed: nothing closed or opened early
        assert not any(el.tag.endswith("script") for el in root.iter())
        assert not any(name.startswith("on") for el in root.iter() for name in el.attrib)
        texts = ["".join(el.itertext()) for el in root.iter(SVG + "text")]
        assert texts.count(hostile) >= 5, (hostile, texts)  # title, axis title, annotation, both legend items


def test_a_hostile_colour_stays_inside_its_attribute():
    markup = svg({"data": [scatter([1, 2], line={"color": '"><script>alert(1)</script>'})]}, 600, 260)

    assert "<script" not in markup
    assert not any(el.tag.endswith("script") for el in parse(markup).iter())


def test_empty_and_malformed_figures_draw_an_empty_frame_or_nothing():
    for figure in ({}, {"data": [], "layout": {}}, {"data": None, "layout": None}, {"data": ["x", 3]}):
        root = parse(svg(figure, 600, 260))
        assert root.find(f".//{SVG}path") is None and root.find(f".//{SVG}rect") is None
    assert svg(None, 600, 260) == "" and svg([1, 2], 600, 260) == ""
    assert chart_preview(None, 260) == ""


def test_all_none_data_draws_no_line_and_no_nan():
    markup = svg({"data": [scatter([None, None, None]), {"type": "bar", "x": X[:3], "y": [None] * 3}]}, 600, 260)

    assert not line_paths(markup) and not bars(markup)
    assert not re.search(r"nan|inf", markup, re.IGNORECASE)


def test_a_single_point_gets_a_range_around_it():
    for trace in (scatter([5], mode="lines+markers"), {"type": "bar", "x": X[:1], "y": [5]}):
        markup = svg({"data": [trace], "layout": base_layout()}, 600, 260)
        assert not re.search(r"nan|inf", markup, re.IGNORECASE)
        assert line_paths(markup) or bars(markup)


def test_unknown_trace_types_are_left_out():
    markup = svg({"data": [{"type": "heatmap", "z": [[1, 2]], "name": "heat"}, scatter([1, 2])]}, 600, 260)

    assert len(line_paths(markup)) == 1


def test_tick_labels_follow_the_axis_format_and_dates():
    rates = svg(rate_figure(points(), band(), metric="error_rate", tool="t"), 373, 260)
    labels = ["".join(el.itertext()) for el in parse(rates).iter(SVG + "text")]

    assert "0%" in labels and any(re.fullmatch(r"\d+(\.\d)?%", label) and label != "0%" for label in labels)
    assert any(label.startswith("00:00") and "Aug 1, 2026" in label for label in labels), labels
    latency = ["".join(el.itertext()) for el in parse(svg(latency_figure(points()), 580, 260)).iter(SVG + "text")]
    assert any(label.endswith(" ms") for label in latency)


def test_every_builder_figure_previews_as_well_formed_svg():
    health = type("Health", (), {
        "hours": [p["start"] for p in points()], "series": {k: [1, 2, 3, 4, 5] for k in ("accepted", "duplicate",
        "rejected", "refused")}, "reasons_by_hour": {k: [{}] * 5 for k in ("rejected", "refused")},
    })()  # fmt: skip
    figures = [
        rate_figure(points(), band(), metric="retry_rate", tool="<b>t</b>"), volume_figure(points(), tool="t"),
        classes_figure(points()), latency_figure(points()), trend_figure(points()), ingest_health_figure(health),
    ]  # fmt: skip
    for figure in figures:
        markup = svg(figure, 580, 260)
        root = parse(markup)
        assert root.find(f".//{SVG}path") is not None or root.find(f".//{SVG}rect") is not None
        assert not re.search(r"nan|inf", markup, re.IGNORECASE)
        assert len(markup) < 12_000  # a few KB a chart: the HTML stays small
