"""Write services of the ingest path. The /v1/traces view calls `spans_ingest` and nothing else writes spans."""

from __future__ import annotations

import datetime as dt
import gc
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.db import Error as DatabaseError
from django.db import connection, transaction
from django.utils import timezone

from ingest import linking, log_events, normalize, otlp, partitions, storage, taxonomy, wire
from ingest.limits import MAX_WRITE, IngestLimits
from ingest.models import API_KEY_PREFIX, API_KEY_VISIBLE_CHARS, ApiKey, IngestStat, Project, hash_api_key, new_api_key
from ingest.records import SpanRecord

# Spans flattened and written per step, so a 64 MiB request never holds all its rows at once.
SLICE_SPANS = 2_000
# How often last_used_at is written for a busy key: not on every request.
KEY_TOUCH_INTERVAL = dt.timedelta(seconds=60)
# The ingest-health counters' bucket (IngestStat.hour holds its start).
STAT_BUCKET_MINUTES = 5


@dataclass
class IngestResult:
    accepted: int = 0
    duplicates: int = 0
    tool_calls: int = 0
    rejected: Counter = field(default_factory=Counter)  # reason -> spans
    cuts: otlp.Cuts = field(default_factory=otlp.Cuts)  # limit -> values the input bounds cut (docs/contract/limits.md)
    # reason -> the first span rejected for it and the particulars: the sender's partial_success names one
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def rejected_count(self) -> int:
        return sum(self.rejected.values())

    def rejection_message(self) -> str:
        return "; ".join(
            f"{count} span(s) rejected: {reason}" + (f" (first: {self.examples[reason]})" if reason in self.examples else "")
            for reason, count in sorted(self.rejected.items())
        )


class WriteTooSlow(DatabaseError):
    """The write took longer than MAX_WRITE: rolled back, and answered as a database that cannot take it (503)."""


class AuthError(Exception):
    def __init__(self, http_status: int, message: str):
        super().__init__(message)
        self.http_status = http_status
        self.message = message


def api_key_create(*, project: Project, name: str = "default") -> tuple[ApiKey, str]:
    """Create a key; the plain key is returned once and only its hash is stored."""
    plain = new_api_key()
    key = ApiKey.objects.create(
        project=project,
        name=name,
        prefix=plain[: len(API_KEY_PREFIX) + API_KEY_VISIBLE_CHARS],
        hashed_key=hash_api_key(plain),
    )
    return key, plain


def api_key_revoke(*, key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def api_key_authenticate(authorization: str, *, project_slug: str = "") -> ApiKey:
    """The active key named by an `Authorization: Bearer <key>` header, or AuthError (401/403)."""
    scheme, _, token = authorization.strip().partition(" ")
    if not authorization.strip():
        raise AuthError(401, "missing Authorization header; send 'Authorization: Bearer <project API key>'")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(401, "Authorization header must be 'Bearer <project API key>'")
    key = ApiKey.objects.select_related("project").filter(hashed_key=hash_api_key(token.strip())).first()
    if key is None:
        raise AuthError(401, "API key not recognised")
    if key.revoked_at is not None:
        raise AuthError(403, f"API key {key.prefix}… was revoked")
    if project_slug and project_slug != key.project.slug:
        raise AuthError(403, f"API key {key.prefix}… belongs to another project, not '{project_slug}'")
    return key


def api_key_touch(*, key: ApiKey, now: dt.datetime) -> None:
    if key.last_used_at is None or now - key.last_used_at >= KEY_TOUCH_INTERVAL:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)


def spans_ingest(*, project: Project, request, limits: IngestLimits, now: dt.datetime | None = None) -> IngestResult:
    """Store every span of a decoded ExportTraceServiceRequest, once, with a tool-call row per tool span.

    Durable on return: everything is committed in one transaction (resources not stored
    yet just before it, in their own). Spans already stored (same project, trace and
    span id) count as duplicates and change nothing.
    Spans that cannot be stored are counted in `rejected` by reason (partial success).
    Raises django.db.Error when the database cannot take the write.
    """
    now = now or timezone.now()
    started = time.monotonic()
    now_ns = int(now.timestamp()) * 1_000_000_000
    oldest_ns = now_ns - project.retention_days * 86_400 * 1_000_000_000
    result = IngestResult()
    escalation_tools = frozenset(project.escalation_tools or ())

    # Partition DDL locks the parent table, so it runs before (outside) the write transaction;
    # new resources are stored before it too (storage.resource_ids says why).
    # `request` is an ExportTraceServiceRequest, or a large body's wire.LargeRequest: wire serves both.
    partitions.ensure_partitions(wire.start_days(request, min_ns=oldest_ns, max_ns=now_ns + 86_400 * 10**9))
    resources = wire.request_resources(request, limits, cuts=result.cuts)
    resource_ids = storage.resource_ids(project.pk, resources, now)

    parents: dict[linking.Key, str] = {}
    agents: dict[linking.Key, str] = {}
    agentless: list[linking.Key] = []
    first_start_ns = None
    with _gc_paused(), transaction.atomic(), storage.changed_buckets_marked_last():
        _bound_statement_time()
        slice_: list[SpanRecord] = []
        for item in wire.iter_spans(request, limits, now_ns=now_ns, resources=resources, cuts=result.cuts):
            if isinstance(item, otlp.RejectedSpan):
                result.rejected[item.reason] += item.count
                if item.detail and item.reason not in result.examples:
                    result.examples[item.reason] = f"span {item.span_id or '(none)'}: {item.detail}"
                continue
            if item.start_ns < oldest_ns:
                result.rejected[f"older than the project's retention of {project.retention_days} days"] += 1
                continue
            key = (item.trace_id, item.span_id)
            parents[key] = item.parent_span_id
            agent = linking.span_agent(item.attributes)
            if agent:
                agents[key] = agent
            first_start_ns = item.start_ns if first_start_ns is None else min(first_start_ns, item.start_ns)
            slice_.append(item)
            if len(slice_) >= SLICE_SPANS:
                _write_slice(project, slice_, resource_ids, escalation_tools, now, parents, agents, agentless, result)
                slice_ = []
        _write_slice(project, slice_, resource_ids, escalation_tools, now, parents, agents, agentless, result)
        if first_start_ns is not None:
            _settle_agents(project, parents, agents, agentless, first_start_ns)
        _record_stats(project, now, result)
        elapsed = time.monotonic() - started
        if elapsed > MAX_WRITE.total_seconds():
            raise WriteTooSlow(f"the write took {elapsed:.0f} s, over the {MAX_WRITE.total_seconds():.0f} s allowed; rolled back")
    return result


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a request is flattened and written.

    Each span allocates dozens of dicts, lists and records; every 700 of them start a
    collection that walks the young ones (and, now and then, every object of the
    process): about a tenth of the CPU of the Python work of a span. They form no
    cycles, so reference counting frees them all the same, and the peak RSS of a
    64 MiB request does not change; whatever cyclic garbage a request leaves is
    collected after it.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _bound_statement_time() -> None:
    """Give up (and answer 503) before the exporters' 10 s timeout turns a slow 200 into a duplicate."""
    if connection.vendor != "postgresql":
        return
    timeout_ms = int(settings.INGEST_STATEMENT_TIMEOUT_MS)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true)",
            [f"{timeout_ms}ms", f"{timeout_ms}ms"],
        )


def _write_slice(project, spans, resource_ids, escalation_tools, now, parents, agents, agentless, result: IngestResult) -> None:
    if not spans:
        return
    span_rows = [
        storage.span_row(project.pk, span, agents.get((span.trace_id, span.span_id), ""), now, resource_ids[span.resource_digest])
        for span in spans
    ]
    new_keys = storage.insert_spans(span_rows)
    result.accepted += len(new_keys)
    result.duplicates += len(spans) - len(new_keys)
    made: list[list] = []  # [span, call] of each new tool span
    buckets: set[int] = set()
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key not in new_keys:
            continue
        new_keys.discard(key)  # the same span twice in one request is stored once
        call = normalize.normalize_tool_call(span, escalation_tools=escalation_tools)
        if call is None:
            continue
        if not call.agent:
            call.agent = linking.resolve_agent(key, parents, agents)
            if not call.agent:
                agentless.append(key)
        made.append([span, call])
        buckets.add(span.start_ns // storage.BUCKET_NS)
    # Log records stored before their tool spans add their evidence (docs/contract/logs.md#joins).
    _join_stored_log_records(project, made, escalation_tools, buckets)
    toolcall_rows = [storage.toolcall_row(project.pk, span, call, now) for span, call in made]
    storage.insert_toolcalls(toolcall_rows)
    # A sender of its own tool-span shape (taxonomy.NATIVE_TOOL_SPANS: Claude Code) states how a
    # call ended on a child span, which ends first and so may come in this request, an earlier
    # or a later one: its stored call is classified again from its stored span and children.
    _reclassify_span_calls(project, _native_outcome_targets(spans, made), escalation_tools, buckets)
    storage.mark_changed_buckets(project.pk, buckets)
    result.tool_calls += len(toolcall_rows)


_NATIVE_CONVENTIONS = frozenset(native.convention for native in taxonomy.NATIVE_TOOL_SPANS)
_NATIVE_OUTCOME_SPANS = frozenset(native.outcome_span for native in taxonomy.NATIVE_TOOL_SPANS)


def _native_outcome_targets(spans, made: list[list]) -> set[tuple[str, str]]:
    """The tool calls whose outcome child may be stored apart from them: new native tool calls,
    and the parents of new outcome children (docs/contract/spans.md#claude-code)."""
    targets = {(span.trace_id, span.span_id) for span, call in made if call.convention in _NATIVE_CONVENTIONS}
    targets.update(
        (span.trace_id, span.parent_span_id)
        for span in spans
        if span.name in _NATIVE_OUTCOME_SPANS and span.parent_span_id
    )
    return targets


def _settle_agents(project, parents, agents, agentless, first_start_ns: int) -> None:
    """Give tool calls the agent of their nearest agent ancestor, whichever request brought it."""
    traces_with_agents = {trace_id for trace_id, _ in agents}
    pending_traces = {trace_id for trace_id, _ in agentless}
    traces = sorted(traces_with_agents | pending_traces)
    if not traces:
        return
    # Ancestors and earlier tool calls of a trace started within a day before its first span here.
    since = storage.ns_to_datetime(first_start_ns) - dt.timedelta(days=1)
    stored_agentless = storage.find_toolcalls_without_agent(project.pk, sorted(traces_with_agents), since)
    targets = set(agentless) | set(stored_agentless)
    # Only look further up the tree in the database when this request alone cannot settle it.
    resolved = linking.resolve_agents(targets, parents, agents)
    unresolved_traces = sorted({trace_id for trace_id, _ in targets - resolved.keys()})
    if unresolved_traces:
        all_parents, all_agents = dict(parents), dict(agents)
        for trace_id, span_id, parent_span_id, agent in storage.find_agent_spans(project.pk, unresolved_traces, since):
            all_parents.setdefault((trace_id, span_id), parent_span_id)
            if agent:
                all_agents.setdefault((trace_id, span_id), agent)
        resolved.update(linking.resolve_agents(targets - resolved.keys(), all_parents, all_agents))
    changed = storage.set_toolcall_agents(project.pk, resolved, since)
    storage.mark_changed_buckets(project.pk, {int(start.timestamp()) * 10**9 // storage.BUCKET_NS for start in changed})


def _record_stats(project: Project, now: dt.datetime, result: IngestResult) -> None:
    counts = Counter()
    if result.accepted:
        counts[(IngestStat.Outcome.ACCEPTED, "")] = result.accepted
    if result.duplicates:
        counts[(IngestStat.Outcome.DUPLICATE, "")] = result.duplicates
    for reason, count in result.rejected.items():
        counts[(IngestStat.Outcome.REJECTED, reason[:200])] += count
    for limit, count in result.cuts.items():
        counts[(IngestStat.Outcome.CUT, limit)] += count
    ingest_stats_add(project=project, now=now, counts=counts)


def ingest_stats_add(*, project: Project, now: dt.datetime, counts: Counter) -> None:
    """Add to the ingest-health counters of `now`'s five-minute bucket (an upsert, safe under
    concurrent requests). The column is still called `hour`: readers sum the buckets of an hour
    for long ranges, and ingest health draws short ranges at five minutes (dashboard/selectors/health.py)."""
    if not counts:
        return
    hour = now.replace(minute=now.minute - now.minute % STAT_BUCKET_MINUTES, second=0, microsecond=0)
    rows = sorted(counts.items())
    values = ", ".join(["(%s, %s, %s, %s, %s)"] * len(rows))
    params = [value for (outcome, reason), count in rows for value in (project.pk, hour, outcome, reason, count)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO ingest_ingeststat (project_id, hour, outcome, reason, count) VALUES {values} "
            "ON CONFLICT (project_id, hour, outcome, reason) DO UPDATE "
            "SET count = ingest_ingeststat.count + excluded.count",
            params,
        )


def request_refused(*, project: Project, reason: str, now: dt.datetime | None = None) -> None:
    """Count a whole request refused with a 4xx (bad data, too large, wrong media type)."""
    ingest_stats_add(
        project=project, now=now or timezone.now(), counts=Counter({(IngestStat.Outcome.REFUSED, reason[:200]): 1})
    )


# --- log records: POST /v1/logs (docs/contract/logs.md) ------------------------------------------

LOG_RECORDS = "log records"  # the reason of log records' accepted / duplicate counters
METRICS_NOT_STORED = "metric data points: metrics not stored"


@dataclass
class LogsResult:
    accepted: int = 0
    duplicates: int = 0
    tool_calls: int = 0  # tool-call rows made from agents' tool events
    reclassified: int = 0  # stored tool calls whose classification the records changed
    rejected: Counter = field(default_factory=Counter)  # reason -> log records
    cuts: otlp.Cuts = field(default_factory=otlp.Cuts)  # limit -> values the input bounds cut
    examples: dict[str, str] = field(default_factory=dict)  # reason -> the particulars of the first record rejected

    @property
    def rejected_count(self) -> int:
        return sum(self.rejected.values())

    def rejection_message(self) -> str:
        return "; ".join(
            f"{count} log record(s) rejected: {reason}" + (f" (first: {self.examples[reason]})" if reason in self.examples else "")
            for reason, count in sorted(self.rejected.items())
        )


def logs_ingest(*, project: Project, request, limits: IngestLimits, now: dt.datetime | None = None) -> LogsResult:
    """Store every log record of a decoded ExportLogsServiceRequest, once, and apply what they say.

    Durable on return (one transaction, resources just before it), within MAX_WRITE of `now`
    or rolled back (WriteTooSlow, answered 503), as spans_ingest. Records already stored
    (same project, time and digest) count as duplicates and change nothing. What the new
    records add (docs/contract/logs.md): agents' tool events become tool-call rows (queued for
    the rollups), and evidence joins stored tool spans, whose tool calls are re-classified.
    Raises otlp.OtlpError(413) over limits.max_log_records_per_request, django.db.Error when
    the database cannot take the write.
    """
    now = now or timezone.now()
    started = time.monotonic()
    now_ns = int(now.timestamp()) * 1_000_000_000
    oldest_ns = now_ns - project.retention_days * 86_400 * 1_000_000_000
    result = LogsResult()
    escalation_tools = frozenset(project.escalation_tools or ())
    # `request` is an ExportLogsServiceRequest, or a large body's wire.LargeRequest: wire serves both.
    total = wire.count_log_records(request)
    if total > limits.max_log_records_per_request:
        raise otlp.OtlpError(413, f"{total} log records in one request exceeds the limit of {limits.max_log_records_per_request}")

    # Tool calls made from records go to the partitioned tool-call table: its days first.
    partitions.ensure_partitions(wire.log_days(request, min_ns=oldest_ns, max_ns=now_ns + 86_400 * 10**9))
    resources = wire.log_resources(request, limits, cuts=result.cuts)
    resource_ids = storage.resource_ids(project.pk, resources, now)

    with _gc_paused(), transaction.atomic(), storage.changed_buckets_marked_last():
        _bound_statement_time()
        slice_: list = []
        for item in wire.iter_log_records(request, limits, now_ns=now_ns, resources=resources, cuts=result.cuts):
            if isinstance(item, otlp.RejectedSpan):
                result.rejected[item.reason] += item.count
                if item.detail and item.reason not in result.examples:
                    result.examples[item.reason] = item.detail
                continue
            if item.time_ns < oldest_ns:
                result.rejected[f"older than the project's retention of {project.retention_days} days"] += 1
                continue
            slice_.append(item)
            if len(slice_) >= SLICE_SPANS:
                _write_log_slice(project, slice_, resource_ids, escalation_tools, now, oldest_ns, result)
                slice_ = []
        _write_log_slice(project, slice_, resource_ids, escalation_tools, now, oldest_ns, result)
        if result.accepted and project.logs_since is None:
            Project.objects.filter(pk=project.pk, logs_since__isnull=True).update(logs_since=now)
        _record_log_stats(project, now, result)
        elapsed = time.monotonic() - started
        if elapsed > MAX_WRITE.total_seconds():
            raise WriteTooSlow(f"the write took {elapsed:.0f} s, over the {MAX_WRITE.total_seconds():.0f} s allowed; rolled back")
    return result


def _write_log_slice(project, records, resource_ids, escalation_tools, now, oldest_ns, result: LogsResult) -> None:
    if not records:
        return
    rows = [storage.log_row(project.pk, record, resource_ids[record.resource_digest], now) for record in records]
    new_keys = storage.insert_log_records(rows)
    result.accepted += len(new_keys)
    result.duplicates += len(records) - len(new_keys)
    fresh = []
    for record in records:
        key = (storage.ns_to_datetime(record.time_ns), record.digest)
        if key in new_keys:
            new_keys.discard(key)  # the same record twice in one request is stored (and applied) once
            fresh.append(record)
    if not fresh:
        return
    buckets: set[int] = set()
    traces = sorted({record.trace_id for record in fresh if record.trace_id})
    stored = storage.find_toolcalls_in_traces(project.pk, traces) if traces else []
    # Tool calls of spans (not those made from log events): what evidence may join.
    span_calls = {(call.trace_id, call.span_id): call for call in stored if call.convention not in log_events.CONVENTIONS}
    by_call_id = {(call.trace_id, call.call_id): call for call in span_calls.values() if call.call_id}

    # 1. Evidence for stored tool spans: re-classify them with every record they have now.
    targets: set[tuple[str, str]] = set()
    for record in fresh:
        item = log_events.evidence_of(record)
        if item is None:
            continue
        kind, trace_id, ident = item[0]
        if kind == log_events.SPAN_KEY and (trace_id, ident) in span_calls:
            targets.add((trace_id, ident))
        elif kind == log_events.CALL_KEY and (call := by_call_id.get((trace_id, ident))) is not None:
            targets.add((call.trace_id, call.span_id))
    result.reclassified += _reclassify_span_calls(project, targets, escalation_tools, buckets)

    # 2. Agents' tool events become tool calls, unless a stored span is the same tool use.
    pending: dict[tuple[str, str], tuple] = {}
    for record in fresh:
        if record.event_name not in log_events.TOOL_SHAPES:
            continue
        if record.trace_id and record.call_id and (record.trace_id, record.call_id) in by_call_id:
            continue  # counted once: as the span's tool call, which step 1 gave the event's evidence
        made = log_events.tool_call_of(record, escalation_tools=escalation_tools)
        if made is None or made[0].start_ns < oldest_ns:
            continue
        pending.setdefault((made[0].trace_id, made[0].span_id), made)
    existing = storage.existing_toolcall_keys(project.pk, pending) if pending else set()
    toolcall_rows = []
    for key, (span, call) in sorted(pending.items()):
        if key in existing:
            continue
        toolcall_rows.append(storage.toolcall_row(project.pk, span, call, now))
        buckets.add(span.start_ns // storage.BUCKET_NS)
    storage.insert_toolcalls(toolcall_rows)
    result.tool_calls += len(toolcall_rows)
    storage.mark_changed_buckets(project.pk, buckets)


def _reclassify_span_calls(project, targets: set[tuple[str, str]], escalation_tools, buckets: set[int]) -> int:
    """Classify these stored tool calls again from their stored spans and every stored log
    record that is evidence for them; returns how many changed (their buckets are queued)."""
    if not targets:
        return 0
    traces = sorted({trace_id for trace_id, _ in targets})
    spans = storage.trace_span_records(project.pk, traces)
    records = storage.find_trace_log_records(project.pk, traces)
    changed = 0
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key not in targets:
            continue
        targets.discard(key)  # a span id stored twice (PostgreSQL keys hold the start time): the first
        call = _normalize_with_logs(span, spans, records, escalation_tools)
        if call is None:
            continue
        start = storage.update_toolcall_failure(project.pk, key, call)
        if start is not None:
            changed += 1
            buckets.add(storage.datetime_to_ns(start) // storage.BUCKET_NS)
    return changed


def _normalize_with_logs(span, trace_spans, records, escalation_tools):
    """The tool call of `span` with the evidence of `records` (both arrival orders end here).

    The first pass gives the call id the call-keyed evidence is joined on."""
    children = [other for other in trace_spans if other.parent_span_id == span.span_id]
    call = normalize.normalize_tool_call(span, escalation_tools=escalation_tools, children=children)
    if call is None:
        return None
    evidence = log_events.merged_evidence(log_events.evidence_for(records, span.trace_id, span.span_id, call.call_id))
    if evidence is None:
        return call
    return normalize.normalize_tool_call(span, escalation_tools=escalation_tools, children=children, log_evidence=evidence)


def _join_stored_log_records(project, made: list[list], escalation_tools, buckets: set[int]) -> None:
    """The span side of the joins: new tool spans read the log records stored before them.

    `made` holds [span, call] of each new tool span of a slice; a call with evidence is
    classified again with it (the call keeps its resolved agent). A tool call made earlier
    from an agent's tool event of the same tool use (same call id in the trace) is deleted:
    the span's call counts that tool use, once.
    """
    if not made or project.logs_since is None:  # a project that never sent a log record pays nothing here
        return
    traces = sorted({span.trace_id for span, _ in made})
    records = storage.find_trace_log_records(project.pk, traces)
    if not records:
        return
    by_trace: dict[str, list] = {}
    for record in records:
        by_trace.setdefault(record.trace_id, []).append(record)
    slice_spans: dict[str, list] = {}
    for span, _ in made:
        slice_spans.setdefault(span.trace_id, []).append(span)
    superseded: set[tuple[str, str]] = set()
    for item in made:
        span, call = item
        mine = by_trace.get(span.trace_id)
        if not mine:
            continue
        evidence = log_events.merged_evidence(log_events.evidence_for(mine, span.trace_id, span.span_id, call.call_id))
        if evidence is not None:
            # The same arguments as the first normalize_tool_call of _write_slice, plus the evidence.
            children = [other for other in slice_spans[span.trace_id] if other.parent_span_id == span.span_id]
            renewed = normalize.normalize_tool_call(
                span, escalation_tools=escalation_tools, children=children, log_evidence=evidence
            )
            if renewed is not None:
                renewed.agent = call.agent
                item[1] = renewed
        if call.call_id:
            for record in mine:
                if record.call_id == call.call_id and record.event_name in log_events.TOOL_SHAPES:
                    key = log_events.tool_call_key(record)
                    if key is not None:
                        superseded.add(key)
    if superseded:
        for start in storage.delete_toolcalls(project.pk, superseded):
            buckets.add(storage.datetime_to_ns(start) // storage.BUCKET_NS)


def _record_log_stats(project: Project, now: dt.datetime, result: LogsResult) -> None:
    counts = Counter()
    if result.accepted:
        counts[(IngestStat.Outcome.ACCEPTED, LOG_RECORDS)] = result.accepted
    if result.duplicates:
        counts[(IngestStat.Outcome.DUPLICATE, LOG_RECORDS)] = result.duplicates
    for reason, count in result.rejected.items():
        counts[(IngestStat.Outcome.REJECTED, f"{LOG_RECORDS}: {reason}"[:200])] += count
    for limit, count in result.cuts.items():
        counts[(IngestStat.Outcome.CUT, f"{LOG_RECORDS}: {limit}")] += count
    ingest_stats_add(project=project, now=now, counts=counts)


def metrics_dropped(*, project: Project, data_points: int, now: dt.datetime | None = None) -> None:
    """Count metric data points received and dropped (Toolwatch stores traces and logs)."""
    if data_points <= 0:
        return
    ingest_stats_add(
        project=project,
        now=now or timezone.now(),
        counts=Counter({(IngestStat.Outcome.REJECTED, METRICS_NOT_STORED): data_points}),
    )
