"""The span waterfall of one trace (pure: no database, no Django).

`build(spans)` lays the spans out as a tree by parent id, depth first, siblings by start
time, and gives each bar its offset and width as percentages of the trace's duration, so
a template can draw it with plain HTML and CSS.

Decisions worth knowing:
- A span whose parent is not in the trace (the parent arrives late, or was dropped) is
  still shown, as a root, marked `orphan`. So is a span caught in a parent cycle, which
  only hostile or broken senders produce: every span is drawn exactly once.
- Rows are identified by position, not span id: on PostgreSQL the unique key includes the
  start time, so two spans of a trace may share an id. Each is drawn; children attach to
  the first.
- A bar is at least MIN_WIDTH_PCT wide, so a zero-length span is still visible, and never
  runs past the right edge. A span that ends before it starts (clock skew) has length 0.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

MIN_WIDTH_PCT = 0.5
# Deeper spans are indented no further, so a pathological chain stays on screen.
MAX_INDENT = 12


class SpanLike(Protocol):
    span_id: str
    parent_span_id: str
    start_time: dt.datetime
    end_time: dt.datetime


@dataclass(frozen=True)
class Row:
    span: Any
    depth: int
    offset_pct: float  # where the bar starts, 0..100 of the trace's duration
    width_pct: float  # how long it is, MIN_WIDTH_PCT..100
    offset_ms: float  # from the trace's start
    duration_ms: float
    orphan: bool  # has a parent id, but the parent is not in the trace
    has_children: bool

    @property
    def indent(self) -> int:
        return min(self.depth, MAX_INDENT)


@dataclass(frozen=True)
class Waterfall:
    start: dt.datetime | None
    end: dt.datetime | None
    duration_ms: float
    rows: list[Row]

    @property
    def orphans(self) -> int:
        return sum(row.orphan for row in self.rows)


def _ms(delta: dt.timedelta) -> float:
    return delta.total_seconds() * 1000


def build(spans: Sequence[SpanLike]) -> Waterfall:
    """The spans as waterfall rows, in tree order; see the module docstring."""
    if not spans:
        return Waterfall(None, None, 0.0, [])
    start = min(span.start_time for span in spans)
    end = max(max(span.end_time, span.start_time) for span in spans)
    total_ms = _ms(end - start)

    order = sorted(range(len(spans)), key=lambda i: (spans[i].start_time, spans[i].span_id, i))
    first_with_id: dict[str, int] = {}
    for i in order:
        first_with_id.setdefault(spans[i].span_id, i)
    children: dict[int, list[int]] = defaultdict(list)
    roots: list[int] = []
    for i in order:
        parent = first_with_id.get(spans[i].parent_span_id) if spans[i].parent_span_id else None
        if parent is None or parent == i:
            roots.append(i)
        else:
            children[parent].append(i)

    rows: list[Row] = []
    placed: set[int] = set()

    def place(root: int) -> None:
        # Iterative depth-first walk: a chain thousands deep must not hit the recursion limit.
        stack = [(root, 0)]
        while stack:
            i, depth = stack.pop()
            if i in placed:
                continue
            placed.add(i)
            rows.append(_row(spans[i], depth, start, total_ms, orphan=depth == 0 and bool(spans[i].parent_span_id),
                             has_children=bool(children.get(i))))  # fmt: skip
            stack.extend((child, depth + 1) for child in reversed(children.get(i, ())))

    for root in roots:
        place(root)
    # Whatever a walk from the roots never reached sits in a parent cycle: show it as a root.
    for i in order:
        if i not in placed:
            place(i)
    return Waterfall(start, end, total_ms, rows)


def _row(span: SpanLike, depth: int, start: dt.datetime, total_ms: float, *, orphan: bool, has_children: bool) -> Row:
    offset_ms = _ms(span.start_time - start)
    duration_ms = max(_ms(span.end_time - span.start_time), 0.0)
    if total_ms <= 0:
        offset_pct, width_pct = 0.0, 100.0
    else:
        offset_pct = offset_ms / total_ms * 100
        width_pct = max(duration_ms / total_ms * 100, MIN_WIDTH_PCT)
        offset_pct = min(offset_pct, 100 - width_pct)
    return Row(
        span=span,
        depth=depth,
        offset_pct=round(offset_pct, 3),
        width_pct=round(width_pct, 3),
        offset_ms=offset_ms,
        duration_ms=duration_ms,
        orphan=orphan,
        has_children=has_children,
    )
