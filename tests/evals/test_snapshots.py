"""The pure snapshot builder: which spans a case keeps, in tree order, and the waterfall geometry."""

from __future__ import annotations

import datetime as dt

import pytest

from evals.snapshots import snapshot_spans, waterfall

T0 = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def span(span_id: str, parent: str = "", at: int = 0, ms: int = 10) -> dict:
    start = T0 + dt.timedelta(milliseconds=at)
    return {"span_id": span_id, "parent_span_id": parent, "start_time": start, "end_time": start + dt.timedelta(milliseconds=ms)}


def shape(rows):
    return [(row["span_id"], row["role"], row["depth"]) for row in rows]


def test_it_keeps_ancestors_siblings_and_descendants_and_drops_other_branches():
    spans = [
        span("tool", "step", at=20), span("root"), span("step", "root", at=5), span("other", "root", at=50),
        span("cousin", "other", at=55), span("sib", "step", at=10), span("http", "tool", at=21),
        span("deep", "http", at=22),
    ]  # fmt: skip
    assert shape(snapshot_spans(spans, "tool")) == [
        ("root", "ancestor", 0),
        ("step", "ancestor", 1),
        ("sib", "sibling", 2),
        ("tool", "tool", 2),
        ("http", "descendant", 3),
        ("deep", "descendant", 4),
    ]


def test_a_missing_parent_ends_the_chain_and_the_top_kept_span_is_a_root():
    spans = [span("step", "gone"), span("tool", "step", at=1)]
    assert shape(snapshot_spans(spans, "tool")) == [("step", "ancestor", 0), ("tool", "tool", 1)]


def test_a_root_tool_span_has_no_siblings_kept():
    spans = [span("tool"), span("other")]
    assert shape(snapshot_spans(spans, "tool")) == [("tool", "tool", 0)]


def test_a_parent_cycle_in_bad_data_does_not_loop():
    spans = [span("a", "b"), span("b", "a"), span("tool", "a")]
    assert {row["span_id"] for row in snapshot_spans(spans, "tool")} == {"a", "b", "tool"}


def test_an_unknown_span_is_a_key_error():
    with pytest.raises(KeyError):
        snapshot_spans([span("a")], "tool")


def test_the_waterfall_places_each_span_on_the_snapshots_time_span():
    rows = waterfall([span("a", ms=100), span("b", at=50, ms=50), span("c", at=100, ms=0)])
    assert [(row["offset_pct"], row["width_pct"], row["duration_ms"]) for row in rows] == [
        (0.0, 100.0, 100.0), (50.0, 50.0, 50.0), (99.5, 0.5, 0.0)
    ]  # fmt: skip
    assert waterfall([]) == []
