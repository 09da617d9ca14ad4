"""Pure: which spans of a trace a promoted case keeps, in tree order.

The snapshot is the promoted tool span, its ancestors (the agent steps that led to it),
its siblings (what else that step did) and its descendants (its own HTTP or database
spans, the evidence of the failure). Other branches of a long trace are left out: they
explain nothing about this call and would make a case as large as its trace.

Spans are plain dicts with at least span_id, parent_span_id and start_time; the output is
the same dicts with `role` and `depth` added, parents before children, siblings by start
time. A parent missing from the trace (not yet received, or past retention) simply ends
the ancestor chain.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

TOOL, ANCESTOR, SIBLING, DESCENDANT = "tool", "ancestor", "sibling", "descendant"


def snapshot_spans(spans: list[dict[str, Any]], span_id: str) -> list[dict[str, Any]]:
    """The spans to freeze for the tool span `span_id`, each with `role` and `depth`, in tree order.

    Raises KeyError when `span_id` is not among `spans`.
    """
    by_id = {span["span_id"]: span for span in spans}
    tool = by_id[span_id]
    children: dict[str, list[dict]] = defaultdict(list)
    for span in spans:
        children[span["parent_span_id"]].append(span)

    roles: dict[str, str] = {span_id: TOOL}
    ancestor = by_id.get(tool["parent_span_id"])
    while ancestor is not None and ancestor["span_id"] not in roles:  # a cycle in bad data ends it too
        roles[ancestor["span_id"]] = ANCESTOR
        ancestor = by_id.get(ancestor["parent_span_id"])
    if tool["parent_span_id"]:
        for sibling in children.get(tool["parent_span_id"], []):
            roles.setdefault(sibling["span_id"], SIBLING)
    below = list(children.get(span_id, []))
    while below:
        span = below.pop()
        if span["span_id"] not in roles:
            roles[span["span_id"]] = DESCENDANT
            below.extend(children.get(span["span_id"], []))

    kept = [span for span in spans if span["span_id"] in roles]
    kept_ids = {span["span_id"] for span in kept}
    # Roots of the kept forest: spans whose parent was not kept (the top ancestor, or an orphan).
    roots = [span for span in kept if span["parent_span_id"] not in kept_ids]
    ordered: list[dict[str, Any]] = []
    visited: set[str] = set()

    def visit(span: dict, depth: int) -> None:
        visited.add(span["span_id"])
        ordered.append({**span, "role": roles[span["span_id"]], "depth": depth})
        for child in _by_start(children.get(span["span_id"], [])):
            if child["span_id"] in kept_ids and child["span_id"] not in visited:
                visit(child, depth + 1)

    # Then whatever a parent cycle in bad data left unreached, so the tool span is never lost.
    for root in [*_by_start(roots), *_by_start(kept)]:
        if root["span_id"] not in visited:
            visit(root, 0)
    return ordered


def waterfall(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Offsets and widths (percent of the snapshot's time span) for a simple waterfall bar per span.

    Takes spans with start_time/end_time (datetimes) and returns them with `offset_pct`
    and `width_pct` (at least 0.5 so a 0 ms span stays visible), rounded for templates, and `duration_ms`.
    """
    if not spans:
        return []
    start = min(span["start_time"] for span in spans)
    end = max(span["end_time"] for span in spans)
    total = max((end - start).total_seconds(), 1e-9)
    rows = []
    for span in spans:
        offset = (span["start_time"] - start).total_seconds() / total * 100
        width = max((span["end_time"] - span["start_time"]).total_seconds() / total * 100, 0.5)
        rows.append(
            {
                **span,
                "duration_ms": (span["end_time"] - span["start_time"]).total_seconds() * 1000,
                "offset_pct": round(min(offset, 99.5), 2),
                "width_pct": round(max(min(width, 100 - offset), 0.5), 2),
            }
        )
    return rows


def _by_start(spans: list[dict]) -> list[dict]:
    return sorted(spans, key=lambda span: (span["start_time"], span["span_id"]))
