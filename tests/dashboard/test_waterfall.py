"""The span waterfall's tree and geometry (pure: no database)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from dashboard import waterfall

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


@dataclass
class S:
    span_id: str
    parent_span_id: str
    start_ms: float
    end_ms: float

    @property
    def start_time(self):
        return T0 + dt.timedelta(milliseconds=self.start_ms)

    @property
    def end_time(self):
        return T0 + dt.timedelta(milliseconds=self.end_ms)


def ids(layout):
    return [(row.span.span_id, row.depth) for row in layout.rows]


def test_an_empty_trace_has_no_rows():
    layout = waterfall.build([])

    assert layout.rows == [] and layout.duration_ms == 0


def test_spans_form_a_tree_by_parent_id_depth_first_with_siblings_by_start_time():
    spans = [
        S("tool2", "agent", 600, 900),
        S("llm", "agent", 0, 100),
        S("agent", "", 0, 1000),
        S("tool1", "agent", 200, 500),
        S("http", "tool1", 250, 450),
    ]

    layout = waterfall.build(spans)

    assert ids(layout) == [("agent", 0), ("llm", 1), ("tool1", 1), ("http", 2), ("tool2", 1)]
    assert [row.has_children for row in layout.rows] == [True, False, True, False, False]


def test_each_bar_is_offset_and_sized_to_scale_of_the_traces_duration():
    layout = waterfall.build([S("agent", "", 0, 1000), S("tool", "agent", 250, 750)])

    agent, tool = layout.rows
    assert layout.duration_ms == 1000
    assert (agent.offset_pct, agent.width_pct) == (0, 100)
    assert (tool.offset_pct, tool.width_pct) == (25, 50)
    assert (tool.offset_ms, tool.duration_ms) == (250, 500)


def test_the_trace_spans_from_its_first_start_to_its_last_end_even_past_the_root():
    # A child that outlives its root (clock skew, or an async tool) stretches the scale.
    layout = waterfall.build([S("root", "", 100, 600), S("late", "root", 500, 1100)])

    root, late = layout.rows
    assert layout.duration_ms == 1000
    assert (root.offset_pct, root.width_pct) == (0, 50)
    assert (late.offset_pct, late.width_pct) == (40, 60)


def test_a_zero_length_span_still_gets_a_visible_bar_that_stays_inside_the_track():
    layout = waterfall.build([S("root", "", 0, 1000), S("instant", "root", 1000, 1000)])

    instant = layout.rows[1]
    assert instant.width_pct == waterfall.MIN_WIDTH_PCT
    assert instant.offset_pct + instant.width_pct <= 100


def test_a_span_that_ends_before_it_starts_has_no_length():
    layout = waterfall.build([S("root", "", 0, 1000), S("skewed", "root", 500, 400)])

    assert layout.rows[1].duration_ms == 0


def test_a_trace_of_zero_duration_draws_full_width_bars():
    layout = waterfall.build([S("a", "", 5, 5), S("b", "a", 5, 5)])

    assert [(row.offset_pct, row.width_pct) for row in layout.rows] == [(0, 100), (0, 100)]


def test_a_span_whose_parent_has_not_arrived_is_a_root_marked_orphan():
    layout = waterfall.build([S("agent", "", 0, 1000), S("tool", "missing-parent", 100, 200), S("child", "tool", 120, 180)])

    assert ids(layout) == [("agent", 0), ("tool", 0), ("child", 1)]
    assert [row.orphan for row in layout.rows] == [False, True, False]
    assert layout.orphans == 1


def test_spans_in_a_parent_cycle_are_each_shown_once():
    layout = waterfall.build([S("a", "b", 0, 10), S("b", "a", 1, 5), S("self", "self", 2, 3)])

    assert sorted(row.span.span_id for row in layout.rows) == ["a", "b", "self"]
    assert len(layout.rows) == 3
    assert all(row.orphan for row in layout.rows if row.depth == 0)


def test_a_very_deep_chain_does_not_hit_the_recursion_limit_and_caps_its_indent():
    spans = [S(f"s{n}", f"s{n - 1}" if n else "", n, 5000) for n in range(3000)]

    layout = waterfall.build(spans)

    assert len(layout.rows) == 3000
    assert layout.rows[-1].depth == 2999
    assert layout.rows[-1].indent == waterfall.MAX_INDENT


def test_two_spans_with_one_id_are_both_drawn():
    layout = waterfall.build([S("root", "", 0, 100), S("dup", "root", 10, 20), S("dup", "root", 30, 40)])

    assert ids(layout) == [("root", 0), ("dup", 1), ("dup", 1)]
