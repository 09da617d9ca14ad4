"""A static SVG preview of a Plotly figure dict, drawn on the server so a chart page's first
screen shows its charts with the HTML, before plotly.js has run (about a second of evaluation,
docs/benchmarks.md#chart-page-first-load); static/js/charts.js swaps in the interactive chart.

Pure: a figure in, markup out. Best effort over the subset our builders produce (scatter lines,
markers, gaps, filled bands, bars, two y axes, rect shapes, annotations); anything else is left
out. Close to Plotly's look (its margins, colours, tick rules), not identical to it.

Geometry: the width is the page's, so x is laid out in percent of the plot area (a nested svg
as wide as the box less the margins, in percent of the `width` given, since not every browser
reads calc() in an SVG attribute) and paths in a 0..1000 viewBox stretched over it; strokes do not
stretch (vector-effect). `width` decides the margins' share of the box and how many x ticks and
legend rows there are.
Every string is escaped here: trace names and labels carry untrusted tool names.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import re

from django.utils.safestring import SafeString, mark_safe

SPAN = 1000  # the data layer's viewBox width
CHAR_EM = 0.56  # the average glyph width of system-ui (digits), for estimating label widths
NARROW, WIDE = set(".,:;!|'ijlrtf1 "), set("%mwMW@")
COLORWAY = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
FONT = "system-ui, -apple-system, Segoe UI, sans-serif"
DATE_STEPS = (
    [s * 60 for s in (1, 2, 5, 10, 15, 30)]
    + [h * 3600 for h in (1, 2, 3, 6, 12)]
    + [d * 86400 for d in (1, 2, 3, 7, 14, 28)]
)
DASHES = {"dot": (1, 1), "dash": (3, 3), "longdash": (5, 3), "dashdot": (3, 1, 1, 1)}
LEGEND_ROW = 19
KEEP = ' vector-effect="non-scaling-stroke"'  # on each path: the property is not inherited


def _text(value) -> str:
    """Plotly's pseudo-HTML label as the characters it shows, escaped for the SVG."""
    plain = html.unescape(re.sub(r"<[^>]*>", "", str(value)))
    return html.escape(plain, quote=True)


def _attr(value) -> str:
    return html.escape(str(value), quote=True)


def _num(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _x(value) -> float | None:
    """An x value as a number: dates (ISO strings, as our figures carry them) as epoch seconds."""
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
        return moment.replace(tzinfo=dt.UTC).timestamp()  # Plotly shows a date's wall time, ignoring its zone
    return _num(value)


def _text_width(label: str, size: float = 12) -> float:
    """An estimate from glyph classes (system-ui's widths, roughly): enough to size a margin."""
    em = sum(0.3 if c in NARROW else 0.9 if c in WIDE else CHAR_EM for c in html.unescape(label))
    return em * size


class _Axis:
    """A y axis: its data range, pixel domain and ticks."""

    def __init__(self, spec: dict, top: float, bottom: float):
        self.spec, self.top, self.bottom = spec, top, bottom
        self.low, self.high = 0.0, 1.0

    def fit(self, values: list[float]) -> None:
        given = self.spec.get("range")
        if isinstance(given, list | tuple) and len(given) == 2 and all(_num(v) is not None for v in given):
            self.low, self.high = float(given[0]), float(given[1])
            return
        low = min(values, default=0.0)
        high = max(values, default=1.0)
        if self.spec.get("rangemode") == "tozero":
            low, high = min(low, 0.0), max(high, 0.0)
        if high == low:
            high = low + 1.0
        pad = (high - low) * 0.05  # Plotly pads an autorange by ~5 % of its length
        self.low, self.high = (low if low == 0 else low - pad), (high if high == 0 else high + pad)

    def y(self, value: float) -> float:
        share = (value - self.low) / (self.high - self.low)
        return self.bottom - share * (self.bottom - self.top)

    def ticks(self) -> list[float]:
        span = self.high - self.low
        dtick = _num(self.spec.get("dtick"))
        if not dtick or span / dtick > 12:
            rough = span / (min(max((self.bottom - self.top) / 40, 4), 9) + 1)
            magnitude = 10 ** math.floor(math.log10(rough))
            dtick = next(step * magnitude for step in (2, 5, 10) if step * magnitude >= rough)
        first = math.ceil(self.low / dtick - 1e-9)
        return [n * dtick for n in range(first, int(self.high / dtick + 1e-9) + 1)]

    def labelled(self) -> list[tuple[float, str]]:
        ticks = self.ticks()
        dtick = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
        return [(value, self.label(value, dtick)) for value in ticks]

    def labels_width(self) -> float:
        return max((_text_width(label) for _, label in self.labelled()), default=0.0)

    def label(self, value: float, dtick: float) -> str:
        spec, fmt = self.spec, str(self.spec.get("tickformat") or "")
        percent = re.fullmatch(r",?\.(\d+)(~?)%", fmt)
        if percent:
            text = f"{value * 100:.{int(percent[1])}f}"
            text = (text.rstrip("0").rstrip(".") if "." in text else text) if percent[2] else text
            text += "%"
        elif fmt.endswith("d"):
            text = f"{round(value):,}" if "," in fmt else str(round(value))
        elif abs(value) >= 10_000 and dtick >= 1000:
            text = f"{value / 1000:g}k"
        else:
            digits = max(0, -math.floor(math.log10(dtick))) if dtick < 1 else 0
            text = f"{value:.{digits}f}"
            text = text.rstrip("0").rstrip(".") if "." in text else text  # Plotly shows 1, not 1.0
        return f"{spec.get('tickprefix', '')}{text}{spec.get('ticksuffix', '')}"


def _date_ticks(low: float, high: float, count: float) -> tuple[list[float], float]:
    rough = (high - low) / count
    step = next((s for s in DATE_STEPS if s >= rough), DATE_STEPS[-1])
    first = math.ceil(low / step)
    return [n * step for n in range(first, int(high // step) + 1)], step


def _date_label(moment: float, step: float, first: bool, previous: float | None) -> list[str]:
    """Plotly's: the time of day, with the date under it on the first tick and where the day changes;
    days with the year under the first."""
    when = dt.datetime.fromtimestamp(moment, dt.UTC)
    day = f"{when:%b} {when.day}"
    if step >= 86400:
        return [day, str(when.year)] if first else [day]
    new_day = previous is None or dt.datetime.fromtimestamp(previous, dt.UTC).date() != when.date()
    time = f"{when:%H:%M}"
    return [time, f"{day}, {when.year}"] if new_day else [time]


def _legend(traces: list[dict], layout: dict, width: float) -> list[list[tuple[dict, int]]]:
    """The legend's rows (Plotly's horizontal legend, wrapped at the plot's width)."""
    named = [(trace, i) for i, trace in enumerate(traces) if trace.get("showlegend", True) is not False]
    show = layout.get("showlegend")
    if not named or show is False or (show is None and len(traces) < 2):
        return []
    # Plotly's default order is reversed when a trace fills to the previous one or bars stack.
    if any(
        t.get("fill") in ("tonexty", "tonextx") or (t.get("type") == "bar" and layout.get("barmode") == "stack")
        for t in traces
    ):
        named.reverse()
    rows, used = [[]], 0.0
    for trace, index in named:
        item = 40 + _text_width(str(trace.get("name") or f"trace {index}")) + 10
        if rows[-1] and used + item > width:
            rows.append([])
            used = 0.0
        rows[-1].append((trace, index))
        used += item
    return rows


def _colour(trace: dict, index: int) -> str:
    line, marker = trace.get("line") or {}, trace.get("marker") or {}
    colour = line.get("color") if trace.get("type", "scatter") == "scatter" else None
    colour = colour or (marker.get("color") if isinstance(marker.get("color"), str) else None)
    return colour or COLORWAY[index % len(COLORWAY)]


def _opacity(trace: dict) -> str:
    opacity = _num(trace.get("opacity"))
    return "" if opacity is None else f' opacity="{opacity:g}"'


def _dashes(line: dict, width: float) -> str:
    """Plotly's dash patterns, in multiples of the line's width (at least 3 px)."""
    dash = DASHES.get(str(line.get("dash")))
    return f' stroke-dasharray="{",".join(f"{n * max(width, 3):g}" for n in dash)}"' if dash else ""


def _runs(points: list[tuple[float | None, float | None]], connect: bool) -> list[list[tuple[float, float]]]:
    """The runs of points with both coordinates: a line breaks at a gap unless connectgaps."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if x is None or y is None:
            if not connect and runs[-1]:
                runs.append([])
            continue
        runs[-1].append((x, y))
    return [run for run in runs if run]


def _axis_name(trace: dict) -> str:
    return "yaxis2" if trace.get("yaxis") == "y2" else "yaxis"


def _title(spec) -> str:
    title = spec.get("title") if isinstance(spec, dict) else None
    return str((title.get("text") if isinstance(title, dict) else title) or "")


class _Chart:
    """A figure's geometry: the x range, the plot box in px (margins grown as Plotly's automargin
    and legend grow them, from what was measured against it) and the y axes fitted to the data."""

    def __init__(self, figure: dict, width: float, height: float):
        layout = figure.get("layout") if isinstance(figure.get("layout"), dict) else {}
        self.layout, self.traces = layout, [t for t in figure.get("data") or [] if isinstance(t, dict)]
        self.H = float(height)  # the box's: Plotly (responsive) fills it, whatever the layout's height
        margin = {"l": 80, "r": 80, "t": 100, "b": 80, **(layout.get("margin") or {})}
        self.left, self.right, self.top, bottom = (float(_num(margin[k]) or 0) for k in "lrtb")
        self.xspec = layout.get("xaxis") or {}
        self.yspecs = {name: layout.get(name) or {} for name in ("yaxis", "yaxis2")}
        self.used = {"yaxis"} | {_axis_name(t) for t in self.traces}
        self.bars = [t for t in self.traces if t.get("type") == "bar"]
        self.plot_w = width - self.left - self.right
        self.stack = layout.get("barmode") == "stack"
        self._fit_x()
        self.rows = _legend(self.traces, layout, width - self.left - self.right)
        self.x_ticks, self.x_step = ([], 0.0)
        if self.xs and self.xspec.get("type", "date") == "date":
            count = min(max((width - self.left - self.right) / 80, 4), 9) + 1  # Plotly's tick count rule
            self.x_ticks, self.x_step = _date_ticks(self.xlow, self.xhigh, count)
        # automargin: the x labels (a second line under the first tick), then the legend below them.
        lines = max((len(_date_label(t, self.x_step, n == 0, None)) for n, t in enumerate(self.x_ticks)), default=0)
        bottom = max(bottom, 12 + 15 * lines if lines else 0)
        self.plot_h = self.H - self.top - bottom
        if self.rows:  # Plotly's legend at y=-0.2 pushes the bottom margin to 0.2 of the plot + its rows
            self.plot_h = min(self.plot_h, (self.H - self.top - 41 - LEGEND_ROW * (len(self.rows) - 1)) / 1.2)
        self.axes = self._fit_y()
        for name in self.used:  # automargin: the tick labels and the axis title, on the axis's side
            grow = "right" if self.yspecs[name].get("side") == "right" else "left"
            need = self.axes[name].labels_width() + 8 + (24 if _title(self.yspecs[name]) else 0)
            setattr(self, grow, max(getattr(self, grow), need))

    @property
    def y_bottom(self) -> float:
        return self.top + self.plot_h

    def _fit_x(self) -> None:
        """Every trace's x values as numbers; bars widen the range by half a step each side."""
        self.xs = sorted({x for t in self.traces for x in map(_x, t.get("x") or []) if x is not None})
        steps = [b - a for a, b in zip(self.xs, self.xs[1:], strict=False) if b > a]
        self.step = min(steps, default=3600.0)
        low, high = (self.xs[0], self.xs[-1]) if self.xs else (0.0, 1.0)
        if low == high:
            low, high = low - self.step / 2, high + self.step / 2
        elif any("markers" in str(t.get("mode", "")) for t in self.traces):
            # Plotly pads a range with markers by 5 % of the axis's length (and the marker) each side.
            pad = (0.05 + 3 / max(self.plot_w, 1)) * (high - low) / (1 - 2 * (0.05 + 3 / max(self.plot_w, 1)))
            low, high = low - pad, high + pad
        if self.bars and self.xs:  # bars reach half a step beyond their x, unpadded
            low, high = min(low, self.xs[0] - self.step / 2), max(high, self.xs[-1] + self.step / 2)
        given = self.xspec.get("range")
        if isinstance(given, list | tuple) and len(given) == 2 and None not in map(_x, given):
            low, high = map(_x, given)
        self.xlow, self.xhigh = low, high

    def _fit_y(self) -> dict[str, _Axis]:
        def domain_px(spec: dict) -> tuple[float, float]:
            base = self.yspecs["yaxis"] if spec.get("overlaying") == "y" else spec
            d0, d1 = (base.get("domain") or [0, 1])[:2]
            return self.y_bottom - d1 * self.plot_h, self.y_bottom - d0 * self.plot_h

        axes = {name: _Axis(spec, *domain_px(spec)) for name, spec in self.yspecs.items()}
        values: dict[str, list[float]] = {name: [] for name in axes}
        stacked: dict[tuple[str, float], float] = {}
        for trace in self.traces:
            axis, ys = _axis_name(trace), [_num(v) for v in trace.get("y") or []]
            if trace.get("type") == "bar" and self.stack:
                for x, y in zip(map(_x, trace.get("x") or []), ys, strict=False):
                    if x is not None and y is not None:
                        stacked[(axis, x)] = stacked.get((axis, x), 0.0) + y
            else:
                values[axis] += [y for y in ys if y is not None]
            if trace.get("type") == "bar" or trace.get("fill") in ("tozeroy", "tonexty"):
                values[axis].append(0.0)
        for (axis, _), total in stacked.items():
            values[axis].append(total)
        for name, axis in axes.items():
            axis.fit(values[name])
        return axes

    def share(self, x: float) -> float:
        """x as a share of the plot's width, 0..1."""
        return (x - self.xlow) / (self.xhigh - self.xlow)


def _y_axes(chart: _Chart) -> list[str]:
    """Grid lines, tick labels, zero line and title of each y axis in use (y2 only if a trace is on it)."""
    out = []
    for name in ("yaxis", "yaxis2"):
        if name not in chart.used:
            continue
        axis, spec = chart.axes[name], chart.yspecs[name]
        right_side = spec.get("side") == "right"
        anchor = 'x="100%" dx="3" text-anchor="start"' if right_side else 'x="-3" text-anchor="end"'
        for value, label in axis.labelled():
            y = axis.y(value)
            if spec.get("showgrid", True) and value != 0:
                out.append(
                    f'<line x2="100%" y1="{y:.1f}" y2="{y:.1f}" stroke="{_attr(spec.get("gridcolor", "#eee"))}"/>'
                )
            out.append(f'<text {anchor} y="{y:.1f}" dy=".35em">{_text(label)}</text>')
        if axis.low <= 0 <= axis.high and spec.get("zeroline", True) and not right_side:
            out.append(f'<line x2="100%" y1="{axis.y(0):.1f}" y2="{axis.y(0):.1f}" stroke="#444"/>')
        if _title(spec):
            offset = axis.labels_width() + 16
            place, shift = ('x="100%"', offset) if right_side else ('x="0"', -offset)
            out.append(
                f'<svg {place} overflow="visible">'
                f'<text transform="translate({shift:.0f},{(axis.top + axis.bottom) / 2:.1f})'
                f' rotate(-90)" text-anchor="middle" font-size="14">{_text(_title(spec))}</text></svg>'
            )
    return out


def _x_axis(chart: _Chart) -> list[str]:
    """Vertical grid lines and the date labels under the plot."""
    out, previous = [], None
    stroke = _attr(chart.xspec.get("gridcolor", "#eee"))
    for n, value in enumerate(chart.x_ticks):
        at = f"{chart.share(value) * 100:.2f}%"
        out.append(f'<line x1="{at}" x2="{at}" y1="{chart.top:.1f}" y2="{chart.y_bottom:.1f}" stroke="{stroke}"/>')
        lines = _date_label(value, chart.x_step, n == 0, previous)
        previous = value
        half = max(_text_width(line) for line in lines) / 2
        if not -chart.left <= chart.share(value) * chart.plot_w - half <= chart.plot_w + chart.right - 2 * half:
            continue  # Plotly hides a label that would run past the chart's box
        spans = "".join(
            f'<tspan x="{at}" dy="{0 if i == 0 else 1.2}em">{_text(line)}</tspan>' for i, line in enumerate(lines)
        )
        out.append(f'<text y="{chart.y_bottom + 15:.1f}" text-anchor="middle">{spans}</text>')
    return out


def _shapes(chart: _Chart) -> tuple[list[str], list[str]]:
    """Rect shapes on x spanning the paper's height (below the data) and annotations on x/paper (above it)."""
    below, above = [], []
    for shape in chart.layout.get("shapes") or []:
        if not isinstance(shape, dict) or shape.get("type") != "rect":
            continue
        x0, x1 = _x(shape.get("x0")), _x(shape.get("x1"))
        if x0 is None or x1 is None:
            continue
        a, b = max(0.0, chart.share(min(x0, x1))), min(1.0, chart.share(max(x0, x1)))
        if b > a:
            below.append(
                f'<rect x="{a * 100:.2f}%" width="{(b - a) * 100:.2f}%" y="{chart.top:.1f}" height="{chart.plot_h:.1f}"'
                f' fill="{_attr(shape.get("fillcolor", "rgba(0,0,0,0.1)"))}"/>'
            )
    for note in chart.layout.get("annotations") or []:
        x = _x(note.get("x")) if isinstance(note, dict) else None
        if x is None or not 0 <= chart.share(x) <= 1 or note.get("yref") != "paper":
            continue
        font = note.get("font") or {}
        y = chart.y_bottom - float(_num(note.get("y")) or 0) * chart.plot_h - 3
        above.append(
            f'<text x="{chart.share(x) * 100:.2f}%" y="{y:.1f}" text-anchor="middle"'
            f' font-size="{_num(font.get("size")) or 12:g}" fill="{_attr(font.get("color", "#444"))}">'
            f"{_text(note.get('text', ''))}</text>"
        )
    return below, above


def _bars(chart: _Chart) -> list[str]:
    """Bar traces, one path each in the data layer: grouped side by side, or stacked (barmode)."""
    out, bases = [], {}
    groups = [] if chart.stack else chart.bars
    slot = chart.step / (chart.xhigh - chart.xlow) * (1 - float(_num(chart.layout.get("bargap")) or 0.2))
    width = slot / len(groups) if groups else slot
    for trace in chart.bars:
        name = _axis_name(trace)
        axis = chart.axes[name]
        shift = (groups.index(trace) - (len(groups) - 1) / 2) * width if groups else 0.0
        d = []
        for x, y in zip(map(_x, trace.get("x") or []), map(_num, trace.get("y") or []), strict=False):
            if x is None or not y:
                continue
            base = bases.get((name, x), 0.0) if chart.stack else 0.0
            bases[(name, x)] = base + y
            left = (chart.share(x) + shift - width / 2) * SPAN
            d.append(f"M{left:.1f},{axis.y(base + y):.1f}h{width * SPAN:.1f}V{axis.y(base):.1f}h{-width * SPAN:.1f}Z")
        if d:
            colour = _attr(_colour(trace, chart.traces.index(trace)))
            out.append(f'<path class="bars" d="{"".join(d)}" fill="{colour}"{_opacity(trace)}/>')
    return out


def _scatter(chart: _Chart) -> list[str]:
    """Lines (broken at gaps), markers and fills of the scatter traces, as paths of the data layer:
    strokes keep their width (non-scaling), markers are zero-length segments with round caps, so
    they stay round when the layer stretches."""
    paths, previous_runs = [], []
    for index, trace in enumerate(chart.traces):
        if trace.get("type", "scatter") != "scatter":
            continue
        axis = chart.axes[_axis_name(trace)]
        points = [(_x(x), _num(y)) for x, y in zip(trace.get("x") or [], trace.get("y") or [], strict=False)]
        runs = _runs(points, trace.get("connectgaps") is True)

        def at(point: tuple[float, float], axis=axis) -> str:
            return f"{chart.share(point[0]) * SPAN:.0f},{axis.y(point[1]):.1f}"  # x: 1/1000 of the width

        colour = _attr(_colour(trace, index))
        opacity = _opacity(trace)
        fill, fill_colour = trace.get("fill"), _attr(trace.get("fillcolor") or _colour(trace, index))
        rings = []
        if fill == "tonexty" and previous_runs and runs:  # between this trace and the one before (our bands)
            rings = [[*(p for run in runs for p in run), *reversed([p for run in previous_runs for p in run])]]
        elif fill == "toself":
            rings = runs
        elif fill == "tozeroy":
            rings = [[(run[0][0], 0.0), *run, (run[-1][0], 0.0)] for run in runs]
        paths += [f'<path d="M{"L".join(map(at, ring))}Z" fill="{fill_colour}"{opacity}/>' for ring in rings]
        previous_runs = runs
        mode, line = str(trace.get("mode") or "lines"), trace.get("line") or {}
        line_w = 2.0 if _num(line.get("width")) is None else _num(line.get("width"))
        if "lines" in mode and line_w > 0 and runs:
            dashes = _dashes(line, line_w)
            d = "".join(f"M{'L'.join(map(at, run))}" for run in runs)
            paths.append(
                f'<path d="{d}" stroke="{colour}" stroke-width="{line_w:g}" stroke-linejoin="round"'
                f"{dashes}{opacity}{KEEP}/>"
            )
        if "markers" in mode and runs:
            size = _num((trace.get("marker") or {}).get("size")) or 6
            d = "".join(f"M{at(p)}l0,0" for run in runs for p in run)
            paths.append(
                f'<path d="{d}" stroke="{colour}" stroke-width="{size:g}" stroke-linecap="round"{opacity}{KEEP}/>'
            )
    return paths


def _data_layer(chart: _Chart) -> list[str]:
    """Bars, then fills, lines and markers, in a layer stretched over the plot's width (x in 0..SPAN, y in px)."""
    paths = [*_bars(chart), *_scatter(chart)]
    if not paths:
        return []
    return [
        f'<svg width="100%" height="{chart.H:g}" viewBox="0 0 {SPAN} {chart.H:g}" preserveAspectRatio="none"'
        f' fill="none">{"".join(paths)}</svg>'
    ]


def _swatch(trace: dict, colour: str, x: float, y: float) -> str:
    """A legend item's symbol: a square for bars, a bar of the fill for bands, else the line as drawn."""
    if trace.get("type") == "bar":
        return f'<rect x="{x + 14:.1f}" y="{y - 6:.1f}" width="12" height="12" fill="{colour}"/>'
    if trace.get("fill"):
        fill = _attr(trace.get("fillcolor") or colour)
        return f'<rect x="{x + 5:.1f}" y="{y - 3:.1f}" width="30" height="6" fill="{fill}"/>'
    line = trace.get("line") or {}
    width = min(_num(line.get("width")) or 2.0, 5.0)
    dashes = _dashes(line, width)
    return (
        f'<line x1="{x + 5:.1f}" x2="{x + 35:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="{width:g}"'
        f"{dashes}{_opacity(trace)}/>"
    )


def _frame(chart: _Chart) -> list[str]:
    """What sits outside the plot box: the title (top left, as our layouts place it) and the legend's rows."""
    out = []
    title = chart.layout.get("title")
    if _title(chart.layout):
        size = _num(((title if isinstance(title, dict) else {}).get("font") or {}).get("size")) or 17
        out.append(
            f'<text x="0" y="{chart.top / 2:.1f}" dy=".35em" font-size="{size:g}">{_text(_title(chart.layout))}</text>'
        )
    legend_top = chart.y_bottom + 0.2 * chart.plot_h
    for r, row in enumerate(chart.rows):
        x, y = chart.left, legend_top + 12 + r * LEGEND_ROW
        for trace, index in row:
            colour, name = _attr(_colour(trace, index)), str(trace.get("name") or f"trace {index}")
            out.append(_swatch(trace, colour, x, y))
            out.append(f'<text x="{x + 40:.1f}" y="{y:.1f}" dy=".35em">{_text(name)}</text>')
            x += 40 + _text_width(name) + 10
    return out


def svg(figure: dict, width: int, height: int) -> SafeString:
    """The figure as an aria-hidden inline <svg>, `height` px tall (its box's CSS height, which
    Plotly fills) and as wide as its box (`width`: that box's usual width, for tick density and legend
    rows); an empty string for what is not a figure dict."""
    if not isinstance(figure, dict):
        return mark_safe("")
    chart = _Chart(figure, float(width), float(height))
    below, above = _shapes(chart)
    plot = [*below, *_x_axis(chart), *_y_axes(chart), *_data_layer(chart), *above]
    font = chart.layout.get("font") or {}
    return mark_safe(
        f'<svg class="chart-preview" width="100%" height="{chart.H:g}" aria-hidden="true" focusable="false"'
        f' font-family="{_attr(font.get("family", FONT))}" font-size="{_num(font.get("size")) or 12:g}"'
        f' fill="{_attr(font.get("color", "#444"))}">{"".join(_frame(chart))}'
        f'<svg x="{chart.left / width * 100:.2f}%" width="{chart.plot_w / width * 100:.2f}%" height="{chart.H:g}"'
        f' overflow="visible">{"".join(plot)}</svg></svg>'
    )
