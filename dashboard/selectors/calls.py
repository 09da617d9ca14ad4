"""A trace's logical calls: its tool calls linked into calls by the rollups' own code.

The rollups link attempts with `attempts.link_attempts` and count each call with
`attempts.call_counts` (docs/contract/attempts.md). This reads one trace's attempts with the
very fields the rollups read (`rows.ATTEMPT_FIELDS` through `rows.attempts_from_rows`) and
runs the same two functions, so the trace page and its API show exactly the calls, retries
and escalations the rollups count for the trace.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from dashboard.rollups.attempts import Attempt, CallTotals, LogicalCall, call_counts, link_attempts
from dashboard.rollups.rows import ATTEMPT_FIELDS, attempts_from_rows
from dashboard.selectors.traces import Trace
from ingest.models import Project, ToolCall


@dataclass(frozen=True)
class AttemptView:
    """One attempt (tool span) of a logical call, in linking order."""

    span_id: str
    number: int  # 1 for the call's first attempt, then 2, 3, ... (its position, not a marker)
    start: dt.datetime
    offset_ms: float  # start, in ms after the trace's first span started
    ok: bool
    error_class: str | None  # None when it succeeded; "unknown" for a failure with no class
    latency_ms: float
    call_id: str
    marked_attempt: int | None  # tool.call.attempt as sent
    resend_count: int | None  # http.request.resend_count as sent
    escalated: bool
    # How this attempt counts as a retry of the one before it (all False for a first attempt):
    # the counts of the pair (before, this), so they add up to the call's own counts.
    failed_retry: bool
    wasted_retry: bool
    blind_retry: bool
    previous_error_class: str | None  # the class of the attempt before, when it failed (for the page's wording)
    on_page: bool  # its tool-call card is on the trace page (a truncated trace shows only its first spans)

    @property
    def anchor(self) -> str:
        """The id of its tool-call card on the trace page (templates/dashboard/_trace_call.html)."""
        return f"call-{self.span_id}"

    @property
    def retry(self) -> bool:
        return self.number > 1


@dataclass(frozen=True)
class CallView:
    """One logical call: its tool (and the first attempt's dimensions), attempts and counts."""

    tool: str
    service: str
    environment: str
    agent: str
    start: dt.datetime  # its first attempt's
    attempts: list[AttemptView]
    ok: bool  # the last attempt's outcome
    error_class: str | None  # None when ok; the last attempt's class ("unknown" when it has none)
    retries: int
    failed_retries: int
    wasted_retries: int
    blind_retries: int
    escalated: bool  # any attempt escalated
    latency_ms: float  # the sum of its attempts' latencies (waits between them not included)

    @property
    def attempt_count(self) -> int:
        return len(self.attempts)

    @property
    def anchor(self) -> str:
        return f"logical-call-{self.attempts[0].span_id}"


def trace_attempts(project: Project, trace: Trace) -> list[Attempt]:
    """Every tool call of the trace as an Attempt, read as the rollups read them.

    The rollups link the attempts of a range plus LINK_SLACK (1 h) on each side, so that a
    call crossing the range's edges links whole; for one trace there are no edges: all of its
    tool calls are the input. trace_get already holds them unless the trace was truncated (no
    query then); a truncated trace's are read in one query, past the spans the page shows too,
    so the counts still cover the whole trace.
    """
    if trace.truncated:
        # A tool call starts when its span does, never before the trace's first span: the
        # bound prunes the day partitions before it.
        rows = ToolCall.objects.filter(
            project=project, trace_id=trace.trace_id, start_time__gte=trace.spans[0].start_time
        ).values_list(*ATTEMPT_FIELDS)
    else:
        rows = [tuple(getattr(call, name) for name in ATTEMPT_FIELDS) for call in trace.calls.values()]
    return attempts_from_rows(rows)


class TraceCalls(list):
    """The CallViews of a trace, plus `totals`: their counts summed as the rollups sum them."""

    totals: CallTotals


def trace_calls(project: Project, trace: Trace) -> TraceCalls:
    """The trace's logical calls, ordered by first attempt (no query, one for a truncated trace)."""
    shown = {span.span_id for span in trace.spans} & trace.calls.keys()
    trace_start = trace.spans[0].start_time if trace.spans else None
    result, totals = TraceCalls(), CallTotals()
    for call in link_attempts(trace_attempts(project, trace)):
        counts = call_counts(call)
        totals.add_counts(counts)
        result.append(_call_view(call, counts, shown, trace_start))
    result.totals = totals
    return result


def _call_view(call: LogicalCall, counts, shown: set[str], trace_start: dt.datetime | None) -> CallView:
    attempts, failed, wasted, blind, error_class, escalated = counts
    first = call.first
    views = []
    for number, attempt in enumerate(call.attempts, start=1):
        before = call.attempts[number - 2] if number > 1 else None
        if before is not None:
            # The pair's counts: each kind of retry is defined on (attempt before, retry).
            _, pair_failed, pair_wasted, pair_blind, _, _ = call_counts(LogicalCall([before, attempt]))
        else:
            pair_failed = pair_wasted = pair_blind = 0
        offset = (attempt.start - trace_start) / dt.timedelta(milliseconds=1) if trace_start else 0.0
        views.append(
            AttemptView(
                span_id=attempt.span_id, number=number, start=attempt.start, offset_ms=offset, ok=attempt.ok,
                error_class=None if attempt.ok else (attempt.error_class or "unknown"), latency_ms=attempt.latency_ms,
                call_id=attempt.call_id, marked_attempt=attempt.attempt, resend_count=attempt.resend_count,
                escalated=attempt.escalated, failed_retry=bool(pair_failed), wasted_retry=bool(pair_wasted),
                blind_retry=bool(pair_blind),
                previous_error_class=None if before is None or before.ok else (before.error_class or "unknown"),
                on_page=attempt.span_id in shown,
            )
        )
    return CallView(
        tool=first.tool, service=first.service, environment=first.environment, agent=first.agent, start=first.start,
        attempts=views, ok=error_class is None, error_class=error_class, retries=attempts - 1, failed_retries=failed,
        wasted_retries=wasted, blind_retries=blind, escalated=escalated,
        latency_ms=sum(attempt.latency_ms for attempt in call.attempts),
    )  # fmt: skip
