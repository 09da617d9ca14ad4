"""Rollups computed inside PostgreSQL: the same rows as dashboard.rollups.python_path (which
SQLite runs, and which the tests hold this one to), at a fraction of the cost.

Linking (dashboard.rollups.attempts) only ever joins attempts of one tool in one trace, so an attempt
alone in its (trace, tool) within the link window is a logical call of one attempt: most
calls, grouped in SQL where they lie. The groups of several attempts are linked in SQL too,
by window functions over the attempts in linking order, when their call ids each occur in
one unbroken run (then every attempt joins the call before it or starts one); only groups
where an id comes back after another are linked in Python. The linked calls' part of the
rows goes to temporary tables, and one INSERT … SELECT per resolution adds both and writes
ToolRollup and the per-tool ToolRollupTotal (with its failures by fingerprint) together.
Coarser rows (hours from 5-minute rows within the fine horizon, days from hours) are summed
from finer ones. Every statement can be limited to some tools (ToolSet), so that several
connections can share a busy range."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from dashboard.rollups import histograms, rows
from dashboard.rollups.attempts import PERMANENT_CLASSES, link_attempts
from ingest.storage import copy_rows
from ingest.taxonomy import ERROR_CLASSES

EPOCH = "TIMESTAMPTZ '1970-01-01 00:00:00+00'"
# A memory budget for the grouped queries of one range (a day of 10 M calls a month fits).
WORK_MEM = "256MB"

_DIMENSIONS = "tool, service, environment, agent"
_COUNTS = rows.ROLLUP_COLUMNS[rows.COUNTS]


def _tools(alias: str = "") -> str:
    """SQL keeping the rows of the tools in scope (%(tools)s, %(others)s: see ToolSet)."""
    column = f"{alias}.tool" if alias else "tool"
    return f"(%(tools)s::text[] IS NULL OR ({column} = ANY(%(tools)s::text[])) <> %(others)s)"


@dataclass(frozen=True)
class ToolSet:
    """Some of a project's tools, for one of several connections sharing a range: the ones
    named, or with `others` every tool but those."""

    names: tuple[str, ...]
    others: bool = False


def _scope(tools: ToolSet | None) -> dict:
    return {"tools": list(tools.names) if tools else None, "others": bool(tools and tools.others)}


def _bucket(column: str) -> str:
    return f"date_bin(%(step)s::interval, {column}, {EPOCH})"


# dashboard.rollups.histograms.bin_of in SQL: the same IEEE operations, so the same bin.
_BIN = "CASE WHEN t.latency_ms <= 0.01 THEN 0 ELSE ceil(ln(t.latency_ms / 0.01::float8) / ln(1.1::float8))::int END"
# dashboard.rollups.attempts: a failed call's class, with "" read as unknown.
_CLASS = "coalesce(nullif(t.error_class, ''), 'unknown')"
_SINGLE = (
    "t.start_time >= %(since)s AND t.start_time < %(end)s "
    "AND NOT EXISTS (SELECT 1 FROM tw_multi m WHERE m.trace_id = t.trace_id AND m.tool = t.tool)"
)


_CLASS_COUNTS = ", ".join(
    f"count(*) FILTER (WHERE NOT t.ok AND {_CLASS} = '{name}')::int AS err_{name}" for name in ERROR_CLASSES
)
_SUMS = ", ".join(f"sum({name})::int AS {name}" for name in _COUNTS)
_KEY = f"bucket_start, {_DIMENSIONS}"

# The range's calls (of the tools in scope), read once: every later step reads this copy of
# the columns it needs, not the day's partition again.
_LINKED_COLUMNS = (*rows.ATTEMPT_FIELDS, "received_at")
_CREATE_RANGE = f"""
CREATE TEMP TABLE tw_range ON COMMIT DROP AS
SELECT {{columns}}, t.received_at, t.fingerprint, CASE WHEN t.ok THEN '' ELSE t.message END AS message
FROM ingest_toolcall t
WHERE t.project_id = %(project)s AND t.start_time >= %(start)s AND t.start_time < %(end)s AND {_tools('t')}
"""
# The range's traces, in the order of the (project, trace, span, start) index: looked up in
# that order, neighbouring traces share the index pages (2-3 times faster than at random).
_CREATE_TRACES = """
CREATE TEMP TABLE tw_traces ON COMMIT DROP AS
SELECT DISTINCT trace_id FROM tw_range ORDER BY trace_id
"""
# Their attempts in the link slack on either side: looked up trace by trace (each side a
# range of the index) when there are few traces for the calls in the slack (a 5-minute range
# under heavy traffic: the slack holds 24 times the range), else scanned (a day's range, or
# late spans' hours beside quiet ones). LOOKUP_COST: a trace's look-up costs about as much
# as scanning this many calls.
LOOKUP_COST = 20
_SLACK = (
    "SELECT 1 FROM ingest_toolcall t WHERE t.project_id = %(project)s "
    "AND (t.start_time >= %(lo)s AND t.start_time < %(start)s OR t.start_time >= %(end)s AND t.start_time < %(hi)s)"
)
_AROUND_SCANNED = f"""
CREATE TEMP TABLE tw_around ON COMMIT DROP AS
SELECT {{columns}}, t.received_at FROM ingest_toolcall t
WHERE t.project_id = %(project)s AND {_tools("t")}
  AND (t.start_time >= %(lo)s AND t.start_time < %(start)s OR t.start_time >= %(end)s AND t.start_time < %(hi)s)
  AND t.trace_id IN (SELECT trace_id FROM tw_traces)
"""
_AROUND_LOOKED_UP = f"""
CREATE TEMP TABLE tw_around ON COMMIT DROP AS
SELECT t.* FROM tw_traces AS traces CROSS JOIN LATERAL (
    SELECT {{columns}}, t.received_at FROM ingest_toolcall t
    WHERE t.project_id = %(project)s AND t.trace_id = traces.trace_id AND t.start_time >= %(lo)s AND t.start_time < %(start)s
      AND {_tools("t")}
    UNION ALL
    SELECT {{columns}}, t.received_at FROM ingest_toolcall t
    WHERE t.project_id = %(project)s AND t.trace_id = traces.trace_id AND t.start_time >= %(end)s AND t.start_time < %(hi)s
      AND {_tools("t")}
) AS t
"""
# The (trace, tool) groups with several attempts in the link window (the rest are single
# attempts: a call each, grouped where they lie).
_CREATE_MULTI = """
CREATE TEMP TABLE tw_multi ON COMMIT DROP AS
SELECT trace_id, tool FROM (
    SELECT trace_id, tool FROM tw_range
    UNION ALL
    SELECT trace_id, tool FROM tw_around
) AS u
GROUP BY trace_id, tool HAVING count(*) > 1
"""
# Their attempts in dashboard.rollups.attempts' linking order, with what linking needs of the attempt
# before. A group whose non-empty call ids each occur in one unbroken run links sequentially:
# an attempt joins the call of the attempt before it (same id, or a marked or implicit
# retry) or starts a new one, so its call is the running count of new calls. The other
# groups (an id that comes back after another) are linked in Python.
_CREATE_ATTEMPTS = f"""
CREATE TEMP TABLE tw_attempts ON COMMIT DROP AS
WITH universe AS (
    SELECT {", ".join(f"t.{name}" for name in _LINKED_COLUMNS)} FROM tw_range t
    WHERE EXISTS (SELECT 1 FROM tw_multi m WHERE m.trace_id = t.trace_id AND m.tool = t.tool)
    UNION ALL
    SELECT a.* FROM tw_around a WHERE EXISTS (SELECT 1 FROM tw_multi m WHERE m.trace_id = a.trace_id AND m.tool = a.tool)
), ordered AS (
    SELECT u.*, coalesce(u.attempt, 0) AS attempt_key, coalesce(u.resend_count, 0) AS resend_key,
           u.span_id COLLATE "C" AS span_key, row_number() OVER linked AS position, lag(u.ok) OVER linked AS before_ok,
           lag(u.error_class) OVER linked AS before_class, lag(u.arguments_hash) OVER linked AS before_arguments,
           lag(u.call_id) OVER linked AS before_id
    FROM universe u
    WINDOW linked AS (PARTITION BY trace_id COLLATE "C", tool COLLATE "C" ORDER BY start_time, coalesce(attempt, 0),
                      coalesce(resend_count, 0), span_id COLLATE "C")
), flagged AS (
    SELECT o.*, o.call_id IS DISTINCT FROM o.before_id AS id_run_start,
           o.position = 1 OR NOT (
               (o.call_id <> '' AND o.call_id = o.before_id)
               OR (NOT (coalesce(o.attempt = 1, false) OR coalesce(o.resend_count = 0, false))
                   AND (coalesce(o.attempt, 0) > 1 OR coalesce(o.resend_count, 0) >= 1
                        OR (NOT o.before_ok AND o.arguments_hash = o.before_arguments
                            AND (o.arguments_hash <> '' OR o.before_id = '' OR o.call_id = ''))))
           ) AS new_call
    FROM ordered o
)
SELECT f.*, sum(f.new_call::int) OVER linked AS call_no, coalesce(lead(f.new_call) OVER linked, true) AS call_ends
FROM flagged f
WINDOW linked AS (PARTITION BY trace_id COLLATE "C", tool COLLATE "C" ORDER BY start_time, attempt_key, resend_key, span_key
                  ROWS UNBOUNDED PRECEDING)
"""

# The groups linked in Python: a non-empty call id in more than one run.
_CREATE_PYTHON_GROUPS = """
CREATE TEMP TABLE tw_python ON COMMIT DROP AS
SELECT trace_id, tool FROM tw_attempts WHERE call_id <> ''
GROUP BY trace_id, tool HAVING count(*) FILTER (WHERE id_run_start) > count(DISTINCT call_id)
"""
_PERMANENT = ", ".join(f"'{name}'" for name in sorted(PERMANENT_CLASSES))
# The calls linked in SQL, one row each, as dashboard.rollups.attempts measures them: dimensions from
# the first attempt, outcome and contract checks from the last.
_CREATE_CALLS = f"""
CREATE TEMP TABLE tw_calls ON COMMIT DROP AS
SELECT trace_id, tool, call_no, min(start_time) AS first_start,
       max(service) FILTER (WHERE new_call) AS service, max(environment) FILTER (WHERE new_call) AS environment,
       max(agent) FILTER (WHERE new_call) AS agent, count(*)::int AS attempts,
       count(*) FILTER (WHERE NOT new_call AND NOT ok)::int AS failed_retries,
       count(*) FILTER (WHERE NOT new_call AND NOT before_ok AND before_class IN ({_PERMANENT}))::int AS wasted_retries,
       count(*) FILTER (WHERE NOT new_call AND NOT before_ok AND before_class = 'validation'
                        AND arguments_hash = before_arguments)::int AS blind_retries,
       bool_or(ok) FILTER (WHERE call_ends) AS ok, max(error_class) FILTER (WHERE call_ends) AS error_class,
       bool_or(escalated) AS escalated, (array_agg(contract) FILTER (WHERE call_ends))[1] AS contract
FROM tw_attempts a
WHERE NOT EXISTS (SELECT 1 FROM tw_python p WHERE p.trace_id = a.trace_id AND p.tool = a.tool)
GROUP BY trace_id, tool, call_no
"""

# The linked calls' part of the rows (SQL's and Python's), as the single attempts' parts are
# grouped: counts per bucket and dimensions (contract tallies as a passed and an applicable
# column per check), and attempts per bucket, dimensions and latency bin.
_CHECK_COLUMNS = tuple(f"{kind}_{name}" for name in rows.CONTRACT_NAMES for kind in ("passed", "applicable"))
_EXTRA_COLUMNS = ("resolution", "bucket_start", "tool", "service", "environment", "agent", *_COUNTS, *_CHECK_COLUMNS)
_BIN_COLUMNS = ("resolution", "bucket_start", "tool", "service", "environment", "agent", "bin", "n")
_KEY_TYPES = ("integer", "timestamptz", "text", "text", "text", "text")
_EXTRA_TYPES = (*_KEY_TYPES, *["integer"] * (len(_EXTRA_COLUMNS) - 6))
_BIN_TYPES = (*_KEY_TYPES, "integer", "integer")


def _table(name: str, columns, types) -> str:
    return f"CREATE TEMP TABLE {name} ({', '.join(f'{c} {t}' for c, t in zip(columns, types))}) ON COMMIT DROP"


_CREATE_EXTRA = f"{_table('tw_extra', _EXTRA_COLUMNS, _EXTRA_TYPES)}; {_table('tw_extra_bins', _BIN_COLUMNS, _BIN_TYPES)}"
_CHECK_COUNTS = ", ".join(
    f"count(*) FILTER (WHERE NOT t.ok AND t.contract -> '{name}' = 'true'::jsonb)::int AS passed_{name}, "
    f"count(*) FILTER (WHERE NOT t.ok AND t.contract -> '{name}' <> 'null'::jsonb)::int AS applicable_{name}"
    for name in rows.CONTRACT_NAMES
)
# Integer sums throughout: a sum of bigints is numeric, several times slower to add.
_SUMMED = ", ".join(f"sum({name})::int AS {name}" for name in (*_COUNTS, *_CHECK_COLUMNS))

# The SQL-linked calls' part of one resolution's rows, as tw_extra rows and their latency bins
# (every attempt of a call counts in its call's bucket).


def _call_key(alias: str) -> str:
    return f"%(resolution)s, {_bucket(f'{alias}.first_start')}, {alias}.tool, {alias}.service, {alias}.environment, {alias}.agent"


_INSERT_EXTRA = f"""
INSERT INTO tw_extra ({", ".join(_EXTRA_COLUMNS)})
SELECT {_call_key("t")}, count(*)::int, sum(t.attempts)::int, sum(t.attempts - 1)::int, sum(t.failed_retries)::int,
       sum(t.wasted_retries)::int, sum(t.blind_retries)::int, count(*) FILTER (WHERE NOT t.ok)::int,
       count(*) FILTER (WHERE t.ok)::int, count(*) FILTER (WHERE t.escalated)::int, {_CLASS_COUNTS}, {_CHECK_COUNTS}
FROM tw_calls t WHERE t.first_start >= %(since)s AND t.first_start < %(end)s
GROUP BY 2, 3, 4, 5, 6
"""
_INSERT_EXTRA_BINS = f"""
INSERT INTO tw_extra_bins ({", ".join(_BIN_COLUMNS)})
SELECT {_call_key("c")}, {_BIN}, count(*)::int
FROM tw_calls c JOIN tw_attempts t USING (trace_id, tool, call_no)
WHERE c.first_start >= %(since)s AND c.first_start < %(end)s
GROUP BY 2, 3, 4, 5, 6, 7
"""
# The 5-minute buckets before the range where SQL-linked calls with an attempt in it began,
# unless every such attempt was received early enough to be in the bucket's rows already.
_EARLIER = f"""
SELECT DISTINCT e.bucket FROM (
    SELECT date_bin('300 seconds', c.first_start, {EPOCH}) AS bucket, a.received_at
    FROM tw_calls c JOIN tw_attempts a USING (trace_id, tool, call_no)
    WHERE c.first_start < %(start)s AND a.start_time >= %(start)s AND a.start_time < %(end)s
) AS e
LEFT JOIN dashboard_rolledupbucket r ON r.project_id = %(project)s AND r.bucket_start = e.bucket
WHERE r.computed_at IS NULL OR e.received_at >= r.computed_at - %(margin)s::interval
"""
# The range's buckets were computed now, from the calls received before `computed_at`.
_RECORD_BUCKETS = """
INSERT INTO dashboard_rolledupbucket (project_id, bucket_start, computed_at)
SELECT %(project)s, bucket, %(computed_at)s
FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '5 minutes', interval '5 minutes') AS bucket
ON CONFLICT (project_id, bucket_start) DO UPDATE SET computed_at = EXCLUDED.computed_at
"""


def _tallies(summed: bool) -> str:
    """{check: [passed, applicable]} of the checks that applied, as dashboard.rollups.rows keeps them."""
    value = "sum({})::int" if summed else "{}"
    pairs = ", ".join(
        f"'{name}', CASE WHEN {value.format(f'applicable_{name}')} > 0 THEN "
        f"jsonb_build_array({value.format(f'passed_{name}')}, {value.format(f'applicable_{name}')}) END"
        for name in rows.CONTRACT_NAMES
    )
    return f"jsonb_strip_nulls(jsonb_build_object({pairs}))"


# One resolution's rows of both tables in one statement: the single-attempt calls grouped where
# they lie, the linked calls' parts added, then written per dimensions (ToolRollup) and summed
# per tool (ToolRollupTotal, beside its failures by fingerprint).
_INSERT_ROWS = f"""
WITH singles AS MATERIALIZED (
    SELECT {_bucket("t.start_time")} AS bucket_start, t.tool, t.service, t.environment, t.agent, {_BIN} AS bin,
           t.ok, {_CLASS} AS error_class, t.escalated, t.contract
    FROM tw_range t WHERE {_SINGLE}
), counts AS MATERIALIZED (
    SELECT {_KEY}, {_SUMMED} FROM (
        SELECT {_KEY}, count(*)::int AS calls, count(*)::int AS attempts, 0 AS retries, 0 AS failed_retries,
               0 AS wasted_retries, 0 AS blind_retries, count(*) FILTER (WHERE NOT t.ok)::int AS errors,
               count(*) FILTER (WHERE t.ok)::int AS resolved, count(*) FILTER (WHERE t.escalated)::int AS escalations,
               {_CLASS_COUNTS}, {_CHECK_COUNTS}
        FROM singles t GROUP BY {_KEY}
        UNION ALL
        SELECT {_KEY}, {", ".join(_COUNTS)}, {", ".join(_CHECK_COLUMNS)} FROM tw_extra WHERE resolution = %(resolution)s
    ) AS parts GROUP BY {_KEY}
), bins AS MATERIALIZED (
    SELECT {_KEY}, bin, sum(n)::int AS n FROM (
        SELECT {_KEY}, bin, count(*)::int AS n FROM singles GROUP BY {_KEY}, bin
        UNION ALL
        SELECT {_KEY}, bin, n FROM tw_extra_bins WHERE resolution = %(resolution)s
    ) AS parts GROUP BY {_KEY}, bin
), dimensioned AS (
    INSERT INTO dashboard_toolrollup (project_id, resolution, {_KEY}, {", ".join(_COUNTS)}, latency_hist, contract)
    SELECT %(project)s, %(resolution)s, {_KEY}, {", ".join(_COUNTS)}, hist, {_tallies(summed=False)}
    FROM counts JOIN (SELECT {_KEY}, jsonb_object_agg(bin::text, n) AS hist FROM bins GROUP BY {_KEY}) AS h
    USING ({_KEY})
    RETURNING 1
), failures AS (
    SELECT bucket_start, tool, jsonb_object_agg(fingerprint, jsonb_build_array(n, f, l, c, m)) AS failures
    FROM (
        SELECT {_bucket("t.start_time")} AS bucket_start, t.tool, t.fingerprint, count(*) AS n,
               to_char(min(t.start_time) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS f,
               to_char(max(t.start_time) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"') AS l,
               max(t.error_class COLLATE "C") AS c, left(max(t.message COLLATE "C"), %(message_chars)s) AS m
        FROM tw_range t
        WHERE t.start_time >= %(since)s AND t.start_time < %(end)s AND NOT t.ok
          AND t.fingerprint <> ''
        GROUP BY 1, 2, 3
    ) AS prints
    GROUP BY 1, 2
), tools AS (
    SELECT bucket_start, tool, {_SUMMED}, {_tallies(summed=True)} AS contract FROM counts GROUP BY 1, 2
), tool_hists AS (
    SELECT bucket_start, tool, jsonb_object_agg(bin::text, n) AS latency_hist
    FROM (SELECT bucket_start, tool, bin, sum(n)::int AS n FROM bins GROUP BY 1, 2, 3) AS tool_bins GROUP BY 1, 2
), per_tool AS (
    INSERT INTO dashboard_toolrolluptotal (project_id, resolution, bucket_start, tool, {", ".join(_COUNTS)},
                                           latency_hist, contract, failures)
    SELECT %(project)s, %(resolution)s, bucket_start, tool, {", ".join(f"coalesce({name}, 0)" for name in _COUNTS)},
           coalesce(latency_hist, '{{}}'::jsonb), coalesce(contract, '{{}}'::jsonb), coalesce(failures, '{{}}'::jsonb)
    FROM tools JOIN tool_hists USING (bucket_start, tool) FULL JOIN failures USING (bucket_start, tool)
    RETURNING 1
)
SELECT (SELECT count(*) FROM dimensioned), (SELECT count(*) FROM per_tool)
"""

def _merged(column: str, kind: str) -> str:
    """SQL merging the JSON objects of `column` over a group, key by key: `counts` ({key: n}, as
    histograms), `tallies` ({check: [passed, applicable]}) or `failures` ({fingerprint: [count,
    first, last, class, message]}, as dashboard/rollups/rows.py merge_failures does)."""
    values = {
        "counts": ("value", "sum(value::bigint)::int AS value"),
        "tallies": ("jsonb_build_array(p, a)", "sum((value->>0)::int)::int AS p, sum((value->>1)::int)::int AS a"),
        "failures": (
            "jsonb_build_array(n, f, l, c, m)",
            'sum((value->>0)::int)::int AS n, min((value->>1) COLLATE "C") AS f, max((value->>2) COLLATE "C") AS l, '
            'max((value->>3) COLLATE "C") AS c, max((value->>4) COLLATE "C") AS m',
        ),
    }
    build, aggregates = values[kind]
    each = "jsonb_each_text" if kind == "counts" else "jsonb_each"
    merged = (
        f"(SELECT coalesce(jsonb_object_agg(key, {build}), '{{}}'::jsonb) FROM (SELECT key, {aggregates} "
        f"FROM unnest(array_agg({column})) AS docs(doc), {each}(docs.doc) GROUP BY key) AS keyed)"
    )
    # A group of one row is its own merge.
    return f"CASE WHEN count(*) = 1 THEN (array_agg({column}))[1] ELSE {merged} END"


# Coarser rows as the sums of finer ones (HOUR from 5-minute rows within the fine horizon,
# DAY from HOUR rows), in both tables; the JSON columns merged key by key per group.
_INSERT_SUMMED = f"""
WITH dimensioned AS (
    INSERT INTO dashboard_toolrollup (project_id, resolution, bucket_start, {_DIMENSIONS}, {", ".join(_COUNTS)},
                                      latency_hist, contract)
    SELECT %(project)s, %(target)s, {_bucket("bucket_start")}, {_DIMENSIONS}, {_SUMS},
           {_merged("latency_hist", "counts")}, {_merged("contract", "tallies")}
    FROM dashboard_toolrollup
    WHERE project_id = %(project)s AND resolution = %(source)s AND bucket_start >= %(since)s AND bucket_start < %(end)s
      AND {_tools()}
    GROUP BY 3, {_DIMENSIONS}
    RETURNING 1
), per_tool AS (
    INSERT INTO dashboard_toolrolluptotal (project_id, resolution, bucket_start, tool, {", ".join(_COUNTS)},
                                           latency_hist, contract, failures)
    SELECT %(project)s, %(target)s, {_bucket("bucket_start")}, tool, {_SUMS},
           {_merged("latency_hist", "counts")}, {_merged("contract", "tallies")}, {_merged("failures", "failures")}
    FROM dashboard_toolrolluptotal
    WHERE project_id = %(project)s AND resolution = %(source)s AND bucket_start >= %(since)s AND bucket_start < %(end)s
      AND {_tools()}
    GROUP BY 3, tool
    RETURNING 1
)
SELECT (SELECT count(*) FROM dimensioned), (SELECT count(*) FROM per_tool)
"""

_DELETE = f"""
DELETE FROM {{table}} WHERE project_id = %(project)s AND resolution = ANY(%(resolutions)s)
AND bucket_start >= %(since)s AND bucket_start < %(end)s AND {_tools()}
"""
FIVE_MINUTES = dt.timedelta(minutes=5)


def recompute(*, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None) -> int:
    """dashboard.rollups.refresh.rollups_recompute on PostgreSQL: [start, end) hour-aligned, `fine_since`
    hour-aligned or None. Returns the ToolRollup rows written."""
    with transaction.atomic(), connection.cursor() as cursor:
        # HOUR rows for every call; 5-minute rows from fine_since on (all of them without it).
        fine_start = start if fine_since is None else max(start, fine_since)
        resolutions = [(3600, start)] + ([(300, fine_start)] if fine_start < end else [])
        _link(cursor, project_id, start, end, resolutions, None)
        _delete(cursor, project_id, [int(r) for r in rows.RESOLUTIONS], start, end, None)
        written = _insert_rows(cursor, project_id, 3600, start, end, None)
        if fine_start < end:
            written += _insert_rows(cursor, project_id, 300, fine_start, end, None)
        written += _sum_rows(cursor, project_id, 3600, 86400, start, end, None)
    return written


def recompute_fine(
    *, project_id: int, start: dt.datetime, end: dt.datetime, computed_at: dt.datetime | None = None,
    tools: ToolSet | None = None,
) -> tuple[int, set[dt.datetime]]:
    """The 5-minute rows of [start, end) (5-minute aligned, within the fine horizon) afresh, then
    the HOUR rows of its hours as the sums of their 5-minute rows, and the DAY rows. Returns
    the ToolRollup rows written and the 5-minute buckets before `start` where calls with an
    attempt in the range began, when that attempt may have arrived after the bucket was last
    computed (a late retry changes its call's bucket: recompute those too). `computed_at`: the
    refresh's clock when it began (now by default), recorded for the range's buckets, unless
    only some `tools` are recomputed (the caller records them when all are done)."""
    with transaction.atomic(), connection.cursor() as cursor:
        earlier = _link(cursor, project_id, start, end, [(300, start)], tools) | _earlier(cursor, project_id, start, end)
        _delete(cursor, project_id, [300], start, end, tools)
        written = _insert_rows(cursor, project_id, 300, start, end, tools)
        written += _sum_rows(cursor, project_id, 300, 3600, start, end, tools)
        written += _sum_rows(cursor, project_id, 3600, 86400, start, end, tools)
        if tools is None:
            record_buckets(cursor, project_id, start, end, computed_at or timezone.now())
    return written, earlier


def record_buckets(cursor, project_id: int, start: dt.datetime, end: dt.datetime, computed_at: dt.datetime) -> None:
    """dashboard.models.RolledUpBucket: the buckets of [start, end) computed from what was received before computed_at."""
    cursor.execute(_RECORD_BUCKETS, {"project": project_id, "start": start, "end": end, "computed_at": computed_at})


def _link(cursor, project_id: int, start: dt.datetime, end: dt.datetime, resolutions: list[tuple[int, dt.datetime]],
          tools: ToolSet | None) -> set[dt.datetime]:  # fmt: skip
    """Temporary tables for the range (and the tools in scope): tw_multi (the (trace, tool)
    groups with several attempts, kept out of the single attempts' grouping) and tw_extra /
    tw_extra_bins (their calls' part of the rows of each (resolution, since) in
    `resolutions`). Returns the 5-minute buckets before `start` where calls linked in Python
    with an attempt in the range began (all of them: few calls are linked there)."""
    lo, hi = start - rows.LINK_SLACK, end + rows.LINK_SLACK
    cursor.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")
    # Inside an outer transaction (a test's, say) an earlier run's tables are still there.
    cursor.execute("DROP TABLE IF EXISTS tw_range, tw_traces, tw_around, tw_multi, tw_attempts, tw_python, tw_calls, tw_extra, tw_extra_bins")
    params = {"project": project_id, "start": start, "end": end, "lo": lo, "hi": hi, **_scope(tools)}
    columns = rows.attempt_columns("t")
    # Each table analysed as soon as it is made: the next statement's plan depends on its size.
    for table, statement in (("tw_range", _CREATE_RANGE), ("tw_traces", _CREATE_TRACES), ("tw_around", None),
                             ("tw_multi", _CREATE_MULTI), ("tw_attempts", _CREATE_ATTEMPTS)):  # fmt: skip
        statement = statement or _around(cursor, params)
        cursor.execute(statement.replace("{columns}", columns), params)
        cursor.execute(f"ANALYZE {table}")
    cursor.execute(_CREATE_PYTHON_GROUPS)
    cursor.execute(_CREATE_CALLS)
    cursor.execute("ANALYZE tw_python, tw_calls")
    cursor.execute(_CREATE_EXTRA)
    for resolution, since in resolutions:
        params = {"resolution": resolution, "step": f"{resolution} seconds", "since": since, "end": end}
        cursor.execute(_INSERT_EXTRA, params)
        cursor.execute(_INSERT_EXTRA_BINS, params)
    earlier = _link_in_python(cursor, start, end, resolutions)
    cursor.execute("ANALYZE tw_extra, tw_extra_bins")
    # The anti-join against tw_multi is estimated at a row or two, which invites nested loops
    # over the grouped parts (quadratic); hash joins are right for the grouping.
    cursor.execute("SET LOCAL enable_nestloop = off")
    return earlier


def _earlier(cursor, project_id: int, start: dt.datetime, end: dt.datetime) -> set[dt.datetime]:
    """The buckets before `start` where calls linked in SQL with an attempt in the range began, as recompute_fine says."""
    margin = f"{rows.RECEIVED_MARGIN.total_seconds()} seconds"
    cursor.execute(_EARLIER, {"project": project_id, "start": start, "end": end, "margin": margin})
    return {row[0] for row in cursor.fetchall()}


def _around(cursor, params: dict) -> str:
    """_AROUND_LOOKED_UP or _AROUND_SCANNED, by the traces to look up and the planner's estimate of the slack's calls."""
    cursor.execute("SELECT count(*) FROM tw_traces")
    traces = cursor.fetchone()[0]
    cursor.execute(f"EXPLAIN (FORMAT JSON) {_SLACK}", params)
    plan = cursor.fetchone()[0]
    slack_calls = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"]
    return _AROUND_LOOKED_UP if traces * LOOKUP_COST < slack_calls else _AROUND_SCANNED


def _link_in_python(cursor, start: dt.datetime, end: dt.datetime, resolutions: list[tuple[int, dt.datetime]]) -> set[dt.datetime]:
    """The groups SQL does not link (tw_python), linked by dashboard.rollups.attempts and added to
    tw_extra / tw_extra_bins; returns the earlier buckets as _link says."""
    cursor.execute(
        f"SELECT {', '.join(rows.ATTEMPT_FIELDS)} FROM tw_attempts "
        "WHERE (trace_id, tool) IN (SELECT trace_id, tool FROM tw_python)"
    )
    calls = link_attempts(rows.attempts_from_rows(cursor.fetchall()))
    earlier = {
        rows.floor_time(call.first.start, 300)
        for call in calls
        if call.first.start < start and any(start <= attempt.start < end for attempt in call.attempts)
    }
    counts, bins = [], []
    for resolution, since in resolutions:
        in_range = (call for call in calls if since <= call.first.start < end)
        for key, bucket in rows.aggregate(in_range, resolutions=(resolution,)).items():
            tallies = (count for name in rows.CONTRACT_NAMES for count in bucket.contract.get(name, (0, 0)))
            counts.append((*key, *rows.count_values(bucket.totals), *tallies))
            bins.extend((*key, int(index), n) for index, n in histograms.histogram(bucket.latencies).items())
    copy_rows(cursor, "tw_extra", _EXTRA_COLUMNS, _EXTRA_TYPES, counts)
    copy_rows(cursor, "tw_extra_bins", _BIN_COLUMNS, _BIN_TYPES, bins)
    return earlier


def _delete(cursor, project_id: int, resolutions: list[int], start: dt.datetime, end: dt.datetime,
            tools: ToolSet | None) -> None:  # fmt: skip
    params = {"project": project_id, "resolutions": resolutions, "since": start, "end": end, **_scope(tools)}
    for table in ("dashboard_toolrollup", "dashboard_toolrolluptotal"):
        cursor.execute(_DELETE.format(table=table), params)


def _insert_rows(cursor, project_id: int, resolution: int, since: dt.datetime, end: dt.datetime,
                 tools: ToolSet | None) -> int:  # fmt: skip
    params = {
        "project": project_id, "resolution": resolution, "step": f"{resolution} seconds", "since": since, "end": end,
        "message_chars": rows.FAILURE_MESSAGE_CHARS, **_scope(tools),
    }  # fmt: skip
    cursor.execute(_INSERT_ROWS, params)
    return cursor.fetchone()[0]


def _sum_rows(cursor, project_id: int, source: int, target: int, start: dt.datetime, end: dt.datetime,
              tools: ToolSet | None) -> int:  # fmt: skip
    """Replace the `target` rows of the `target` buckets [start, end) touches with the sums of
    their `source` rows."""
    first = rows.floor_time(start, target)
    last_end = rows.floor_time(end - dt.timedelta(microseconds=1), target) + dt.timedelta(seconds=target)
    _delete(cursor, project_id, [target], first, last_end, tools)
    params = {"project": project_id, "source": source, "target": target, "step": f"{target} seconds",
              "since": first, "end": last_end, **_scope(tools)}  # fmt: skip
    cursor.execute(_INSERT_SUMMED, params)
    return cursor.fetchone()[0]
