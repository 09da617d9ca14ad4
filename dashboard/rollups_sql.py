"""Rollups computed inside PostgreSQL: the same rows as dashboard.rollups' Python path (which
SQLite runs, and which the tests hold this one to), at a fraction of the cost.

Linking (dashboard.attempts) only ever joins attempts of one tool in one trace, so an attempt
alone in its (trace, tool) within the link window is a logical call of one attempt, and so is
every attempt of a group whose call ids are distinct and where none is a marked or implicit
retry of the one before. Those, most calls, are grouped in SQL where they lie. Only the other
groups are loaded and linked in Python; their calls' part of the rows goes to temporary
tables, and one INSERT … SELECT per resolution adds both and writes ToolRollup and the
per-tool ToolRollupTotal (with its failures by fingerprint) together. Coarser rows (hours
from 5-minute rows within the fine horizon, days from hours) are summed from finer ones."""

from __future__ import annotations

import datetime as dt

from django.db import connection, transaction

from dashboard import histograms, rollups
from dashboard.attempts import link_attempts
from dashboard.models import ERROR_CLASSES
from ingest.storage import copy_rows

EPOCH = "TIMESTAMPTZ '1970-01-01 00:00:00+00'"
# A memory budget for the grouped queries of one range (a day of 10 M calls a month fits).
WORK_MEM = "256MB"

_DIMENSIONS = "tool, service, environment, agent"
_COUNTS = rollups.ROLLUP_COLUMNS[rollups._COUNTS]


def _bucket(column: str) -> str:
    return f"date_bin(%(step)s::interval, {column}, {EPOCH})"


# dashboard.histograms.bin_of in SQL: the same IEEE operations, so the same bin.
_BIN = "CASE WHEN t.latency_ms <= 0.01 THEN 0 ELSE ceil(ln(t.latency_ms / 0.01::float8) / ln(1.1::float8))::int END"
# dashboard.attempts: a failed call's class, with "" read as unknown.
_CLASS = "coalesce(nullif(t.error_class, ''), 'unknown')"
_SINGLE = (
    "t.project_id = %(project)s AND t.start_time >= %(since)s AND t.start_time < %(end)s "
    "AND NOT EXISTS (SELECT 1 FROM tw_multi m WHERE m.trace_id = t.trace_id AND m.tool = t.tool)"
)


_CLASS_COUNTS = ", ".join(
    f"count(*) FILTER (WHERE NOT t.ok AND {_CLASS} = '{name}')::int AS err_{name}" for name in ERROR_CLASSES
)
_SUMS = ", ".join(f"sum({name})::int AS {name}" for name in _COUNTS)
_KEY = f"bucket_start, {_DIMENSIONS}"

# The (trace, tool) groups that need linking in Python. A group whose every attempt would
# start a call of its own (its call ids distinct, and no attempt a marked, same-id or
# implicit retry of the one before it: dashboard.attempts' rules, in its order) is as
# good as single attempts, and stays in SQL.
_CREATE_MULTI = """
CREATE TEMP TABLE tw_multi ON COMMIT DROP AS
WITH in_range AS MATERIALIZED (
    SELECT trace_id, tool, span_id, start_time, call_id, attempt, resend_count, ok, arguments_hash
    FROM ingest_toolcall WHERE project_id = %(project)s AND start_time >= %(start)s AND start_time < %(end)s
), universe AS (
    SELECT * FROM in_range
    UNION ALL
    {around}
), repeated AS (
    SELECT trace_id, tool FROM universe GROUP BY trace_id, tool HAVING count(*) > 1
), ordered AS (
    SELECT u.trace_id, u.tool, u.call_id, u.attempt, u.resend_count, u.arguments_hash,
           count(*) OVER (PARTITION BY u.trace_id, u.tool, u.call_id) AS same_id,
           lag(u.ok) OVER linked AS before_ok, lag(u.arguments_hash) OVER linked AS before_arguments,
           lag(u.call_id) OVER linked AS before_id
    FROM universe u JOIN repeated r ON r.trace_id = u.trace_id AND r.tool = u.tool
    WINDOW linked AS (PARTITION BY u.trace_id, u.tool ORDER BY u.start_time, coalesce(u.attempt, 0),
                      coalesce(u.resend_count, 0), u.span_id COLLATE "C")
)
SELECT trace_id, tool FROM ordered GROUP BY trace_id, tool
HAVING bool_or(
    (call_id <> '' AND same_id > 1)
    OR (NOT (attempt IS NOT DISTINCT FROM 1 OR resend_count IS NOT DISTINCT FROM 0)
        AND (coalesce(attempt, 0) > 1 OR coalesce(resend_count, 0) >= 1
             OR (before_ok = false AND arguments_hash = before_arguments
                 AND (arguments_hash <> '' OR before_id = '' OR call_id = ''))))
)
"""

# The same traces' attempts in the link slack on either side: scanned beside a long range
# (the slack is little more), looked up trace by trace beside a short one (a 5-minute range
# under heavy traffic: the slack would be 24 times the range).
_AROUND_SCANNED = """SELECT trace_id, tool, span_id, start_time, call_id, attempt, resend_count, ok, arguments_hash
    FROM ingest_toolcall
    WHERE project_id = %(project)s
      AND (start_time >= %(lo)s AND start_time < %(start)s OR start_time >= %(end)s AND start_time < %(hi)s)
      AND trace_id IN (SELECT trace_id FROM in_range)"""
_AROUND_LOOKED_UP = """SELECT t.trace_id, t.tool, t.span_id, t.start_time, t.call_id, t.attempt, t.resend_count, t.ok,
           t.arguments_hash
    FROM (SELECT DISTINCT trace_id FROM in_range) AS traces CROSS JOIN LATERAL (
        SELECT * FROM ingest_toolcall t
        WHERE t.project_id = %(project)s AND t.trace_id = traces.trace_id AND t.start_time >= %(lo)s
          AND t.start_time < %(hi)s AND NOT (t.start_time >= %(start)s AND t.start_time < %(end)s)
    ) AS t"""


# Python's part (the linked calls), as the single attempts' parts are grouped: counts per
# bucket and dimensions (contract tallies as a passed and an applicable column per check),
# and attempts per bucket, dimensions and latency bin.
_CHECK_COLUMNS = tuple(f"{kind}_{name}" for name in rollups.CONTRACT_NAMES for kind in ("passed", "applicable"))
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
    for name in rollups.CONTRACT_NAMES
)
# Integer sums throughout: a sum of bigints is numeric, several times slower to add.
_SUMMED = ", ".join(f"sum({name})::int AS {name}" for name in (*_COUNTS, *_CHECK_COLUMNS))


def _tallies(summed: bool) -> str:
    """{check: [passed, applicable]} of the checks that applied, as dashboard.rollups keeps them."""
    value = "sum({})::int" if summed else "{}"
    pairs = ", ".join(
        f"'{name}', CASE WHEN {value.format(f'applicable_{name}')} > 0 THEN "
        f"jsonb_build_array({value.format(f'passed_{name}')}, {value.format(f'applicable_{name}')}) END"
        for name in rollups.CONTRACT_NAMES
    )
    return f"jsonb_strip_nulls(jsonb_build_object({pairs}))"


# One resolution's rows of both tables in one statement: the single-attempt calls grouped where
# they lie, the linked calls' parts added, then written per dimensions (ToolRollup) and summed
# per tool (ToolRollupTotal, beside its failures by fingerprint).
_INSERT_ROWS = f"""
WITH singles AS MATERIALIZED (
    SELECT {_bucket("t.start_time")} AS bucket_start, t.tool, t.service, t.environment, t.agent, {_BIN} AS bin,
           t.ok, {_CLASS} AS error_class, t.escalated, t.contract
    FROM ingest_toolcall t WHERE {_SINGLE}
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
        FROM ingest_toolcall t
        WHERE t.project_id = %(project)s AND t.start_time >= %(since)s AND t.start_time < %(end)s AND NOT t.ok
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
    first, last, class, message]}, as dashboard.rollups.merge_failures does)."""
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
    GROUP BY 3, {_DIMENSIONS}
    RETURNING 1
), per_tool AS (
    INSERT INTO dashboard_toolrolluptotal (project_id, resolution, bucket_start, tool, {", ".join(_COUNTS)},
                                           latency_hist, contract, failures)
    SELECT %(project)s, %(target)s, {_bucket("bucket_start")}, tool, {_SUMS},
           {_merged("latency_hist", "counts")}, {_merged("contract", "tallies")}, {_merged("failures", "failures")}
    FROM dashboard_toolrolluptotal
    WHERE project_id = %(project)s AND resolution = %(source)s AND bucket_start >= %(since)s AND bucket_start < %(end)s
    GROUP BY 3, tool
    RETURNING 1
)
SELECT (SELECT count(*) FROM dimensioned), (SELECT count(*) FROM per_tool)
"""

_DELETE = """
DELETE FROM {table} WHERE project_id = %(project)s AND resolution = ANY(%(resolutions)s)
AND bucket_start >= %(since)s AND bucket_start < %(end)s
"""
FIVE_MINUTES = dt.timedelta(minutes=5)


def recompute(*, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None) -> int:
    """dashboard.rollups.rollups_recompute on PostgreSQL: [start, end) hour-aligned, `fine_since`
    hour-aligned or None. Returns the ToolRollup rows written."""
    with transaction.atomic(), connection.cursor() as cursor:
        _link(cursor, project_id, start, end, fine_since)
        _delete(cursor, project_id, [int(r) for r in rollups.RESOLUTIONS], start, end)
        # HOUR rows for every call; 5-minute rows from fine_since on (all of them without it).
        written = _insert_rows(cursor, project_id, 3600, start, end)
        fine_start = start if fine_since is None else max(start, fine_since)
        if fine_start < end:
            written += _insert_rows(cursor, project_id, 300, fine_start, end)
        written += _sum_rows(cursor, project_id, 3600, 86400, start, end)
    return written


def recompute_fine(*, project_id: int, start: dt.datetime, end: dt.datetime) -> tuple[int, set[dt.datetime]]:
    """The 5-minute rows of [start, end) (5-minute aligned, within the fine horizon) afresh, then
    the HOUR rows of its hours as the sums of their 5-minute rows, and the DAY rows. Returns
    the ToolRollup rows written and the 5-minute buckets before `start` where calls with an
    attempt in the range began (a late retry changes its call's bucket: recompute those too)."""
    with transaction.atomic(), connection.cursor() as cursor:
        earlier = _link(cursor, project_id, start, end, None)
        _delete(cursor, project_id, [300], start, end)
        written = _insert_rows(cursor, project_id, 300, start, end)
        written += _sum_rows(cursor, project_id, 300, 3600, start, end)
        written += _sum_rows(cursor, project_id, 3600, 86400, start, end)
    return written, earlier


def _link(cursor, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None) -> set[dt.datetime]:
    """Temporary tables for the range: tw_multi (the (trace, tool) groups to link) and tw_extra /
    tw_extra_bins (their calls' part of the rows). Returns the 5-minute buckets before `start`
    where linked calls with an attempt in the range began."""
    lo, hi = start - rollups.LINK_SLACK, end + rollups.LINK_SLACK
    cursor.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")
    # Inside an outer transaction (a test's, say) an earlier run's tables are still there.
    cursor.execute("DROP TABLE IF EXISTS tw_multi, tw_extra, tw_extra_bins")
    around = _AROUND_LOOKED_UP if end - start < rollups.LINK_SLACK else _AROUND_SCANNED
    cursor.execute(
        _CREATE_MULTI.replace("{around}", around), {"project": project_id, "start": start, "end": end, "lo": lo, "hi": hi}
    )
    cursor.execute("ANALYZE tw_multi")
    cursor.execute(_CREATE_EXTRA)
    # Trace by trace through the trace index: a scan of the whole link window would read a
    # busy hour's calls for a few linked groups.
    cursor.execute(
        f"SELECT {rollups.attempt_columns('t')} FROM (SELECT DISTINCT trace_id FROM tw_multi) AS linked CROSS JOIN LATERAL ("
        "  SELECT * FROM ingest_toolcall t WHERE t.project_id = %s AND t.trace_id = linked.trace_id"
        "  AND t.start_time >= %s AND t.start_time < %s"
        ") AS t WHERE (t.trace_id, t.tool) IN (SELECT trace_id, tool FROM tw_multi)",
        [project_id, lo, hi],
    )
    calls = link_attempts(rollups.attempts_from_rows(cursor.fetchall()))
    earlier = {
        rollups.floor_time(call.first.start, 300)
        for call in calls
        if call.first.start < start and any(start <= attempt.start < end for attempt in call.attempts)
    }
    counts, bins = [], []
    in_range = (call for call in calls if start <= call.first.start < end)
    for key, bucket in rollups.aggregate(in_range, fine_since=fine_since).items():
        tallies = (count for name in rollups.CONTRACT_NAMES for count in bucket.contract.get(name, (0, 0)))
        counts.append((*key, *rollups.count_values(bucket.totals), *tallies))
        bins.extend((*key, int(index), n) for index, n in histograms.histogram(bucket.latencies).items())
    copy_rows(cursor, "tw_extra", _EXTRA_COLUMNS, _EXTRA_TYPES, counts)
    copy_rows(cursor, "tw_extra_bins", _BIN_COLUMNS, _BIN_TYPES, bins)
    cursor.execute("ANALYZE tw_extra, tw_extra_bins")
    # The anti-join against tw_multi is estimated at a row or two, which invites nested loops
    # over the grouped parts (quadratic); hash joins are right for the grouping.
    cursor.execute("SET LOCAL enable_nestloop = off")
    return earlier


def _delete(cursor, project_id: int, resolutions: list[int], start: dt.datetime, end: dt.datetime) -> None:
    for table in ("dashboard_toolrollup", "dashboard_toolrolluptotal"):
        cursor.execute(
            _DELETE.format(table=table), {"project": project_id, "resolutions": resolutions, "since": start, "end": end}
        )


def _insert_rows(cursor, project_id: int, resolution: int, since: dt.datetime, end: dt.datetime) -> int:
    params = {
        "project": project_id, "resolution": resolution, "step": f"{resolution} seconds", "since": since, "end": end,
        "message_chars": rollups.FAILURE_MESSAGE_CHARS,
    }  # fmt: skip
    cursor.execute(_INSERT_ROWS, params)
    return cursor.fetchone()[0]


def _sum_rows(cursor, project_id: int, source: int, target: int, start: dt.datetime, end: dt.datetime) -> int:
    """Replace the `target` rows of the `target` buckets [start, end) touches with the sums of
    their `source` rows."""
    first = rollups.floor_time(start, target)
    last_end = rollups.floor_time(end - dt.timedelta(microseconds=1), target) + dt.timedelta(seconds=target)
    _delete(cursor, project_id, [target], first, last_end)
    params = {"project": project_id, "source": source, "target": target, "step": f"{target} seconds",
              "since": first, "end": last_end}  # fmt: skip
    cursor.execute(_INSERT_SUMMED, params)
    return cursor.fetchone()[0]
