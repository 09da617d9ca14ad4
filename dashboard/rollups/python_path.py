"""The rollup recompute in Python, through the ORM: SQLite's path, and the reference the
PostgreSQL path (dashboard/rollups/sql.py) is tested against row for row.

Attempts around a range are loaded, linked into logical calls and bucketed
(dashboard/rollups/rows.py); the range's rows of ToolRollup and ToolRollupTotal are replaced
in one transaction, and the days it touches summed again from their hours.
"""

from __future__ import annotations

import datetime as dt

from django.db import connection, transaction

from dashboard.models import ToolRollup, ToolRollupTotal
from dashboard.rollups import histograms
from dashboard.rollups.attempts import Attempt, link_attempts
from dashboard.rollups.rows import (
    ATTEMPT_FIELDS,
    COUNTS,
    DAY,
    DAY_RESOLUTION,
    FAILURE_MESSAGE_CHARS,
    LINK_SLACK,
    RESOLUTIONS,
    ROLLUP_COLUMNS,
    ROLLUP_TYPES,
    TOTAL_COLUMNS,
    TOTAL_TYPES,
    aggregate,
    attempt_columns,
    attempts_from_rows,
    aware,
    floor_time,
    merge_failures,
    rollup_rows,
    total_rows,
)  # fmt: skip
from ingest.models import ToolCall
from ingest.storage import copy_rows

_FAILURES_SQL = {
    "postgresql": "date_bin('300 seconds', start_time, TIMESTAMPTZ '1970-01-01 00:00:00+00')",
    "sqlite": "datetime((CAST(strftime('%%s', start_time) AS INTEGER) / 300) * 300, 'unixepoch')",
}


def load_failures(
    project_id: int, start: dt.datetime, end: dt.datetime, *, fine_since: dt.datetime | None = None
) -> dict[tuple, dict]:
    """The failed attempts that started in [start, end) grouped by fingerprint per 5-minute and
    hour bucket and tool (one grouped query): {(project, resolution, bucket start, tool):
    {fingerprint: [count, first seen, last seen, class, message]}}, ISO times in UTC."""
    # The greatest class and message by code point, as Python compares them (merge_failures).
    c = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_FAILURES_SQL[connection.vendor]}, tool, fingerprint, COUNT(*), MIN(start_time), MAX(start_time), "
            f"MAX(error_class{c}), MAX(message{c}) FROM ingest_toolcall WHERE project_id = %s AND start_time >= %s "
            "AND start_time < %s AND NOT ok AND fingerprint <> '' GROUP BY 1, 2, 3",
            [project_id, start, end],
        )
        groups = cursor.fetchall()
    fine_epoch = int(fine_since.timestamp()) if fine_since else None
    found: dict[tuple, dict] = {}
    for bucket, tool, fingerprint, count, first, last, error_class, message in groups:
        epoch = int(aware(bucket).timestamp())
        first, last = (aware(moment).isoformat(timespec="microseconds") for moment in (first, last))
        entry = {fingerprint: [count, first, last, error_class, message[:FAILURE_MESSAGE_CHARS]]}
        for resolution in RESOLUTIONS:
            if resolution < 3600 and fine_epoch is not None and epoch < fine_epoch:
                continue
            moment = dt.datetime.fromtimestamp(epoch - epoch % resolution, tz=dt.UTC)
            merge_failures(found.setdefault((project_id, int(resolution), moment, tool), {}), entry)
    return found


def _write_rows(rows: list[tuple], model=ToolRollup) -> None:
    """Insert rollup rows (ToolRollup's, or with model=ToolRollupTotal, total_rows' ones): binary
    COPY on PostgreSQL (bulk_create was 44 % of a full recompute)."""
    columns, types = (ROLLUP_COLUMNS, ROLLUP_TYPES) if model is ToolRollup else (TOTAL_COLUMNS, TOTAL_TYPES)
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**dict(zip(columns, row))) for row in rows], batch_size=1000)
        return
    with connection.cursor() as cursor:
        copy_rows(cursor, model._meta.db_table, columns, types, rows)


def _replace(project_id: int, resolutions, start: dt.datetime, end: dt.datetime, rows: list[tuple], failures: dict) -> None:
    """Replace the rows of both tables at `resolutions` in [start, end) with `rows` and their totals."""
    for model in (ToolRollup, ToolRollupTotal):
        model.objects.filter(
            project_id=project_id, resolution__in=resolutions, bucket_start__gte=start, bucket_start__lt=end
        ).delete()
    _write_rows(rows)
    _write_rows(total_rows(rows, failures), ToolRollupTotal)


def load_attempts(project_id: int, start: dt.datetime, end: dt.datetime) -> list[Attempt]:
    """The attempts that started in [start, end), with contract checks for failed ones only."""
    if connection.vendor == "postgresql":
        rows = _pg_attempt_rows(project_id, start, end)
    else:
        rows = (
            ToolCall.objects.filter(project_id=project_id, start_time__gte=start, start_time__lt=end)
            .values_list(*ATTEMPT_FIELDS)
            .iterator(chunk_size=5000)
        )
    return attempts_from_rows(rows)


def _pg_attempt_rows(project_id: int, start: dt.datetime, end: dt.datetime):
    # A plain cursor: the ORM's per-field conversion was most of the load time.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {attempt_columns('t')} FROM ingest_toolcall t WHERE t.project_id = %s AND t.start_time >= %s "
            "AND t.start_time < %s",
            [project_id, start, end],
        )
        return cursor.fetchall()


def recompute_in_python(*, project_id: int, start: dt.datetime, end: dt.datetime, fine_since: dt.datetime | None) -> int:
    """rollups_recompute linking every call in Python: SQLite's path, and the reference the
    PostgreSQL one is tested against. Arguments already aligned as rollups_recompute does."""
    attempts = load_attempts(project_id, start - LINK_SLACK, end + LINK_SLACK)
    calls = [call for call in link_attempts(attempts) if start <= call.first.start < end]
    rows = rollup_rows(project_id, aggregate(calls, fine_since=fine_since))
    failures = load_failures(project_id, start, end, fine_since=fine_since)
    with transaction.atomic():
        _replace(project_id, RESOLUTIONS, start, end, rows, failures)
        written = len(rows) + _recompute_days(project_id, floor_time(start, 86400), end)
    return written


def _recompute_days(project_id: int, first_day: dt.datetime, end: dt.datetime) -> int:
    """Replace the DAY rows of the days in [first_day, end) with the sums of their HOUR rows (and
    the totals' DAY rows with the sums of those)."""
    hours_of_the_days = {
        "project_id": project_id, "resolution": ToolRollup.Resolution.HOUR, "bucket_start__gte": first_day,
        "bucket_start__lt": floor_time(end - dt.timedelta(microseconds=1), 86400) + DAY,
    }  # fmt: skip
    hours = ToolRollup.objects.filter(**hours_of_the_days)
    failures: dict[tuple, dict] = {}
    for hour, tool, found in ToolRollupTotal.objects.filter(**hours_of_the_days).values_list("bucket_start", "tool", "failures"):
        if not found:
            continue
        key = (project_id, DAY_RESOLUTION, floor_time(hour, 86400), tool)
        merge_failures(failures.setdefault(key, {}), found)
    sums: dict[tuple, list] = {}
    counts = ROLLUP_COLUMNS[COUNTS]
    for row in hours.values_list("bucket_start", "tool", "service", "environment", "agent", *counts, "latency_hist", "contract"):
        key = (floor_time(row[0], 86400), *row[1:5])
        entry = sums.get(key)
        if entry is None:
            entry = sums[key] = [[0] * len(counts), [], {}]
        totals = entry[0]
        for index, value in enumerate(row[5:5 + len(counts)]):
            totals[index] += value
        entry[1].append(row[-2])
        for check, (passed, applicable) in row[-1].items():
            tally = entry[2].setdefault(check, [0, 0])
            tally[0] += passed
            tally[1] += applicable
    rows = [
        (project_id, DAY_RESOLUTION, day, tool, service, environment, agent, *totals,
         histograms.merge(hists), dict(sorted(contract.items())))
        for (day, tool, service, environment, agent), (totals, hists, contract) in sorted(sums.items())
    ]  # fmt: skip
    _replace(project_id, [ToolRollup.Resolution.DAY], first_day, end, rows, failures)
    return len(rows)


