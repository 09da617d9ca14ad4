"""Reads of the overview and tool pages (and their API): series, the tools table, fingerprints,
failed calls, baselines. Callers pass projects the user may see (dashboard.scoping)."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from itertools import accumulate

import orjson
from django.db import connection
from django.db.models import Case, Count, DateTimeField, F, Func, IntegerField, Max, Min, Q, Sum, Value, When
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast
from django.utils import timezone

from dashboard.drift import DEFAULT_THRESHOLDS
from dashboard.models import Alert, ToolRollup, ToolRollupTotal
from dashboard.rollups import histograms
from dashboard.rollups.rows import FINE_HORIZON, floor_time, merge_failures
from ingest.models import Project, ToolCall
from ingest.taxonomy import CONTRACT_CHECKS, ERROR_CLASSES


def project_summaries(projects: list[Project], since: dt.datetime) -> list[dict]:
    """Per project: logical calls and failed calls since a time, from hourly rollups, in one query."""
    ids = [project.pk for project in projects]
    totals = {
        row["project"]: row
        for row in _rollup_model({}).objects.filter(
            project__in=ids, resolution=ToolRollup.Resolution.HOUR, bucket_start__gte=floor_time(since, 3600)
        )
        .values("project")
        .annotate(calls=Sum("calls"), failed=Sum("errors"))
        .order_by()
    }
    return [
        {
            "project": project,
            "calls": totals.get(project.pk, {}).get("calls") or 0,
            "failed": totals.get(project.pk, {}).get("failed") or 0,
        }
        for project in projects
    ]


# --- rollup reads: series and the tools table ------------------------------------------------

COUNT_FIELDS = (
    "calls", "attempts", "retries", "failed_retries", "wasted_retries", "blind_retries", "errors", "resolved",
    "escalations", *(f"err_{name}" for name in ERROR_CLASSES),
)  # fmt: skip
# Charts stay readable (and small) at about this many points, whatever the range.
TARGET_POINTS = 120
BUCKET_STEPS = (300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 7 * 86400)


def bucket_seconds_for(start: dt.datetime, end: dt.datetime) -> int:
    """The smallest step that keeps a range within TARGET_POINTS points."""
    span = (end - start).total_seconds()
    for step in BUCKET_STEPS:
        if span / step <= TARGET_POINTS:
            return step
    return BUCKET_STEPS[-1]


def _resolution_for(step: int) -> int:
    if step % 86400 == 0:
        return ToolRollup.Resolution.DAY  # summed from the hours: 24 times fewer rows for long ranges
    return ToolRollup.Resolution.FIVE_MINUTES if step < 3600 else ToolRollup.Resolution.HOUR


def _with_rates(point: dict) -> dict:
    calls = point["calls"]
    for name, part in (("error_rate", "errors"), ("retry_rate", "retries"), ("escalation_rate", "escalations"),
                       ("resolution_rate", "resolved"), ("attempts_per_call", "attempts")):  # fmt: skip
        point[name] = point[part] / calls if calls else None
    return point


def _rollups(project: Project, start, end, resolution: int, filters: dict):
    filters = _check_filters(filters)
    return _rollup_model(filters).objects.filter(
        project=project, resolution=resolution, bucket_start__gte=start, bucket_start__lt=end, **filters
    )


def metric_series(project: Project, *, start: dt.datetime, end: dt.datetime, step: int | None = None, **filters) -> list[dict]:
    """Counts and rates per step over [start, end), every step present (zeros where quiet)."""
    return _series(project, start=start, end=end, step=step or bucket_seconds_for(start, end), filters=filters)[0]


def _series(project: Project, *, start, end, step: int, filters: dict, extra: dict | None = None) -> tuple[list[dict], dict]:
    """metric_series' points, and the range's sums of the `extra` aggregate expressions (same query)."""
    extra = extra or {}
    first = floor_time(start, step)
    # Grouped by step in SQL, read without Django's converters: 120 rows instead of 720 hours.
    rows = (
        _rollups(project, first, end, _resolution_for(step), filters)
        .annotate(slot=BucketStart("bucket_start", step))
        .values("slot")
        .annotate(**{name: Sum(name) for name in COUNT_FIELDS}, **extra)
        .order_by()
    )
    points: dict[dt.datetime, dict] = {}
    moment = first
    while moment < end:
        points[moment] = {"start": moment, **dict.fromkeys(COUNT_FIELDS, 0)}
        moment += dt.timedelta(seconds=step)
    sums = dict.fromkeys(extra, 0)
    for row in _raw_rows(rows):
        slot = row["slot"]
        if isinstance(slot, str):  # SQLite: raw text, naive UTC
            slot = dt.datetime.fromisoformat(slot).replace(tzinfo=dt.UTC)
        point = points.get(slot)
        if point is not None:
            for name in COUNT_FIELDS:
                point[name] += row[name] or 0
            for name in extra:
                sums[name] += row[name] or 0
    return [_with_rates(point) for point in points.values()], sums


MAX_SERIES_POINTS = 2000


def parse_step(value: str | None, start: dt.datetime, end: dt.datetime) -> int | None:
    """A ?step= in seconds, checked: rollups are 5-minute and hourly, so a step must tile them."""
    if value in (None, ""):
        return None
    try:
        step = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"step={value!r} is not a whole number of seconds") from None
    if step < 3600 and (step < 300 or step % 300 or 3600 % step):
        raise ValueError(f"step={step} does not tile the 5-minute rollups; use 300, 600, 900, 1200, 1800 or a multiple of 3600")
    if step >= 3600 and step % 3600:
        raise ValueError(f"step={step} does not tile the hourly rollups; a step of an hour or more is a multiple of 3600")
    if step < 3600 and start < fine_since():
        raise ValueError(
            f"step={step}: five-minute rollups are kept for the last {FINE_HORIZON.days} days only; "
            "use a step of 3600 or more for a range that starts earlier"
        )
    points = (end - start).total_seconds() / step
    if points > MAX_SERIES_POINTS:
        raise ValueError(f"step={step} gives {points:.0f} points over this range; at most {MAX_SERIES_POINTS}, use a larger step")
    return step


def tools_table(project: Project, *, start: dt.datetime, end: dt.datetime, **filters) -> list[dict]:
    """One row per tool over [start, end): counts, rates, p50/p95/p99 latency, contract score (see tools_overview)."""
    return tools_overview(project, start=start, end=end, **filters)["rows"]


# --- the overview and tool pages --------------------------------------------------------------
#
# Cost model: at 10 M calls a month a project holds ~2.6 M five-minute rollup rows and
# ~0.3 M hourly ones (tool × service × environment × agent). So every read below
#  - reads the per-tool totals (ToolRollupTotal: no dimension columns, one row per tool and
#    bucket, hundreds of times fewer rows) unless a service, environment or agent filter needs
#    the dimensioned rows (`_rollup_model`);
#  - sums whole hours from the hourly rows and only the partial hours at a range's edges
#    from the five-minute rows (`_covering`), a 12x smaller scan than five-minute rows;
#  - groups in SQL, one query per shape (all tools' sparklines come with the tools table's
#    counts, not one query per tool);
#  - sums the contract counts by their known keys in the same query, and merges the latency
#    histograms in SQL (`_merged_histograms`), so the database returns ~50 bins per tool
#    instead of every row's JSON;
#  - relies on PostgreSQL's JIT being off (config/settings.py): it compiled for ~300 ms, longer than these queries run.
# Measured (bench/pages.py, docs/benchmarks.md: 50 tools, 540 tool × dimension combinations,
# a loaded 2-core box): the 30-day overview reads ~1,650 total rows (~80 ms of SQL, was ~350 ms
# from ~16k dimensioned rows); what they cost depends on tools × buckets, not on call volume.

HOUR_SECONDS = 3600
SORT_COLUMNS = ("tool", "calls", "error_rate", "retry_rate", "escalation_rate", "wasted_retries", "contract_score", "p95_ms")
DEFAULT_SORT = "-calls"
SPARKLINE_POINTS = 30
RATE_PARTS = {"error_rate": "errors", "retry_rate": "retries", "escalation_rate": "escalations"}
# The band around a rate: the baseline ± this many standard errors at the bucket's volume.
BAND_Z = 2.0
# A baseline week with fewer calls than this draws no band: too little to compare with.
BAND_MIN_CALLS = 100
TOP_FINGERPRINTS = 10
RECENT_FAILED = 20


class SortError(ValueError):
    """A ?sort= that names no column; the message lists the ones there are."""


def parse_sort(value: str | None) -> str:
    """`calls` / `-calls` … checked against SORT_COLUMNS; empty means DEFAULT_SORT."""
    value = (value or "").strip() or DEFAULT_SORT
    if value.lstrip("-") not in SORT_COLUMNS:
        raise SortError(f"sort={value!r} is not a column; use one of {', '.join(SORT_COLUMNS)} (prefix - for descending)")
    return value


def sort_rows(rows: list[dict], sort: str) -> list[dict]:
    """Rows sorted by a parse_sort() value; rows without a value (no calls, no failures) always last."""
    column, descending = sort.lstrip("-"), sort.startswith("-")
    present = [row for row in rows if row.get(column) is not None]
    missing = [row for row in rows if row.get(column) is None]
    # Ties fall back to the tool name, so the order is stable across reloads.
    present.sort(key=lambda row: row["tool"])
    present.sort(key=lambda row: row[column], reverse=descending)
    return present + sorted(missing, key=lambda row: row["tool"])


class BucketStart(Func):
    """bucket_start floored to a step (seconds since the epoch, as rollups.floor_time does), in SQL."""

    output_field = DateTimeField()

    def __init__(self, expression, seconds: int):
        self.seconds = int(seconds)
        super().__init__(expression)

    def as_sql(self, compiler, connection, **extra):  # SQLite stores "YYYY-MM-DD HH:MM:SS" in UTC
        sql, params = compiler.compile(self.source_expressions[0])
        return f"datetime((CAST(strftime('%%s', {sql}) AS INTEGER) / {self.seconds}) * {self.seconds}, 'unixepoch')", params

    def as_postgresql(self, compiler, connection, **extra):
        # date_bin is ~5x faster than arithmetic on EXTRACT(EPOCH …), which is numeric since PostgreSQL 14.
        sql, params = compiler.compile(self.source_expressions[0])
        return f"date_bin('{self.seconds} seconds', {sql}, TIMESTAMPTZ '1970-01-01 00:00:00+00')", params


DIMENSIONS = ("service", "environment", "agent")


def _check_filters(filters: dict) -> dict:
    allowed = {"tool", *DIMENSIONS}
    unknown = set(filters) - allowed
    if unknown:
        raise ValueError(f"unknown filter(s): {', '.join(sorted(unknown))}; use {', '.join(sorted(allowed))}")
    return {name: value for name, value in filters.items() if value}


def _rollup_model(filters: dict):
    """The rollup table a read with these (checked) filters needs: the per-tool totals unless a
    dimension is filtered. Both hold the same numbers (dashboard.rollups writes them together)."""
    return ToolRollup if any(filters.get(name) for name in DIMENSIONS) else ToolRollupTotal


def _ceil_time(moment: dt.datetime, seconds: int) -> dt.datetime:
    return floor_time(moment - dt.timedelta(microseconds=1), seconds) + dt.timedelta(seconds=seconds)


def fine_since(now: dt.datetime | None = None) -> dt.datetime:
    """The oldest five-minute rollups kept (older ones are pruned; hours and days stay)."""
    return _ceil_time((now or timezone.now()) - FINE_HORIZON, HOUR_SECONDS)


def _tiles(start: dt.datetime, end: dt.datetime, finest: int, kept_since: dt.datetime) -> list[tuple[int, dt.datetime, dt.datetime]]:
    """Pure: (resolution, from, to) spans of rollup rows that add up to [start, end) once each:
    days for the whole days (when the caller's steps are whole days), hours for the rest, and
    five-minute buckets for the partial hours at the edges, where they are still kept (before
    `kept_since` an edge takes its whole hour instead)."""
    five, hour, day = (int(r) for r in (ToolRollup.Resolution.FIVE_MINUTES, ToolRollup.Resolution.HOUR, ToolRollup.Resolution.DAY))
    first = floor_time(start, five)
    if finest < hour:
        return [(five, first, end)]
    first_hour, last_hour = _ceil_time(first, hour), floor_time(end, hour)
    if first_hour > last_hour:  # within one hour
        return [(five, first, end)] if first >= kept_since else [(hour, floor_time(first, hour), _ceil_time(end, hour))]
    tiles = []
    if first < first_hour:
        tiles.append((five, first, first_hour) if first >= kept_since else (hour, first_hour - dt.timedelta(hours=1), first_hour))
    first_day, last_day = _ceil_time(first_hour, day), floor_time(last_hour, day)
    if finest % day == 0 and first_day < last_day:
        tiles += [(hour, first_hour, first_day), (day, first_day, last_day), (hour, last_day, last_hour)]
    else:
        tiles.append((hour, first_hour, last_hour))
    if last_hour < end:
        tiles.append((five, last_hour, end) if last_hour >= kept_since else (hour, last_hour, last_hour + dt.timedelta(hours=1)))
    return [(resolution, low, high) for resolution, low, high in tiles if low < high]


def _covering(project: Project, start: dt.datetime, end: dt.datetime, *, finest: int = HOUR_SECONDS, **filters):
    """The rollup rows that add up to [start, end) once each (see _tiles): `finest` is the
    smallest step the caller groups them by."""
    cover = Q()
    for resolution, low, high in _tiles(start, end, finest, fine_since()):
        cover |= Q(resolution=resolution, bucket_start__gte=low, bucket_start__lt=high)
    filters = _check_filters(filters)
    return _rollup_model(filters).objects.filter(cover, project=project, **filters)


# Latency histograms are sparse {bin: count} objects with no fixed keys: summed per group in SQL
# with a lateral json(b)_each and folded back into one object per group, so one row per group
# comes back instead of every row's JSON (or a row per bin: 120 steps × 50 bins of timestamps
# to parse was ~30 ms of the tool page).
_HIST_MERGE = {
    "postgresql": "SELECT g, jsonb_object_agg(key, n)::text FROM (SELECT r.g, j.key, SUM(j.value::bigint) AS n "
    "FROM ({rows}) AS r CROSS JOIN LATERAL jsonb_each_text(r.latency_hist) AS j GROUP BY r.g, j.key) AS m GROUP BY g",
    "sqlite": "SELECT g, json_group_object(key, n) FROM (SELECT r.g AS g, j.key AS key, SUM(j.value) AS n "
    "FROM ({rows}) AS r, json_each(r.latency_hist) AS j GROUP BY r.g, j.key) GROUP BY g",
}


def _merged_histograms(rows, group) -> dict:
    """{group: {bin: count}}: the latency histograms of `rows` summed per `group` (a field or expression).

    Per-tool totals are few (~1,650 rows for 50 tools over 30 days): their histograms are
    summed here, ~20 ms sooner than in SQL. Dimensioned rows can be tens of thousands: in SQL."""
    sql, params = rows.annotate(g=group).values_list("g", "latency_hist").query.sql_with_params()
    in_python = rows.model is ToolRollupTotal
    merged: dict = {}
    with connection.cursor() as cursor:
        cursor.execute(sql if in_python else _HIST_MERGE[connection.vendor].format(rows=sql), params)
        for group_key, bins in cursor.fetchall():
            if isinstance(group, BucketStart) and isinstance(group_key, str):  # SQLite: raw text, naive UTC
                group_key = dt.datetime.fromisoformat(group_key).replace(tzinfo=dt.UTC)
            bins = orjson.loads(bins) if isinstance(bins, str | bytes) else bins
            into = merged.setdefault(group_key, {})
            for name, count in bins.items():
                into[name] = into.get(name, 0) + int(count)
    return merged


def _raw_rows(queryset) -> list[dict]:
    """A values() queryset's rows straight from the cursor, without Django's per-value converters
    (~40 ms for 50 tools × 25 steps × 37 sums): the caller converts what needs it."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


def _contract_sums() -> dict:
    """Aggregates summing each contract check's [passed, applicable] by key: reading known keys
    is ~10x cheaper in PostgreSQL than expanding every row's object."""
    sums = {}
    for check, _ in CONTRACT_CHECKS:
        for index, part in ((0, "passed"), (1, "applicable")):
            value = KeyTextTransform(str(index), KeyTransform(check, "contract"))
            sums[f"contract__{check}__{part}"] = Sum(Cast(value, IntegerField()))
    return sums


def _contract_checks(sums: dict) -> dict[str, list[int]]:
    """{check: [passed, applicable]} from _contract_sums() results, checks that applied only."""
    checks = {}
    for check, _ in CONTRACT_CHECKS:
        applicable = sums.get(f"contract__{check}__applicable") or 0
        if applicable:
            checks[check] = [sums.get(f"contract__{check}__passed") or 0, applicable]
    return checks


def _latency(hist: dict) -> dict:
    return {f"p{q}_ms": histograms.quantile(hist, q / 100) for q in (50, 95, 99)}


def _contract_score(checks: dict[str, list[int]]) -> float | None:
    applicable = sum(counts[1] for counts in checks.values())
    return sum(counts[0] for counts in checks.values()) / applicable if applicable else None


def sparkline_step(start: dt.datetime, end: dt.datetime) -> int:
    """The step giving at most SPARKLINE_POINTS points over the range."""
    span = (end - start).total_seconds()
    return next((step for step in BUCKET_STEPS if span / step <= SPARKLINE_POINTS), BUCKET_STEPS[-1])


def tools_overview(project: Project, *, start: dt.datetime, end: dt.datetime, **filters) -> dict:
    """The overview's tools table: per tool, the counts (docs/contract/metrics.md#counts) and rates, p50/p95/p99 latency, the
    contract score and checks, and `sparkline` (error rate per step, None where quiet); plus
    `spark_starts`, the steps' start times, `spark_step`, and `trend`: the whole project's counts
    and rates per step (the overview's trend chart, summed from the same rows). Two queries."""
    step = sparkline_step(start, end)
    rows = _covering(project, start, end, finest=step, **filters)
    contract_sums = _contract_sums()
    counts: dict[str, dict] = {}
    slots: dict[str, dict[dt.datetime, tuple[int, int]]] = defaultdict(dict)
    trend: dict[dt.datetime, dict] = defaultdict(lambda: dict.fromkeys(COUNT_FIELDS, 0))
    grouped = (
        rows.annotate(slot=BucketStart("bucket_start", step))
        .values("tool", "slot")
        .annotate(**{name: Sum(name) for name in COUNT_FIELDS}, **contract_sums)
        .order_by()
    )
    for row in _raw_rows(grouped):
        if isinstance(row["slot"], str):  # SQLite: raw text, naive UTC
            row["slot"] = dt.datetime.fromisoformat(row["slot"]).replace(tzinfo=dt.UTC)
        total = counts.setdefault(row["tool"], dict.fromkeys([*COUNT_FIELDS, *contract_sums], 0))
        for name in total:
            total[name] += row[name] or 0
        slots[row["tool"]][row["slot"]] = (row["calls"] or 0, row["errors"] or 0)
        for name in COUNT_FIELDS:
            trend[row["slot"]][name] += row[name] or 0
    hists = _merged_histograms(rows, F("tool")) if counts else {}
    starts = []
    moment = floor_time(start, step)
    while moment < end:
        starts.append(moment)
        moment += dt.timedelta(seconds=step)
    table = []
    for tool, total in sorted(counts.items()):
        checks = _contract_checks(total)
        series = [slots[tool].get(moment, (0, 0)) for moment in starts]
        table.append(
            _with_rates({
                **{name: total[name] for name in COUNT_FIELDS}, "tool": tool, **_latency(hists.get(tool, {})),
                "contract_score": _contract_score(checks),
                "contract_checks": {check: passed / applicable for check, (passed, applicable) in checks.items()},
                "sparkline": [errors / calls if calls else None for calls, errors in series],
            })  # fmt: skip
        )
    trend_points = [_with_rates({"start": moment, **trend.get(moment, dict.fromkeys(COUNT_FIELDS, 0))}) for moment in starts]
    return {"rows": table, "spark_starts": starts, "spark_step": step, "trend": trend_points}


def totals_of(rows: list[dict]) -> dict:
    """Pure: the project's totals (counts and rates) from tools-table rows."""
    return _with_rates({name: sum(row[name] for row in rows) for name in COUNT_FIELDS})


def project_totals(project: Project, *, start: dt.datetime, end: dt.datetime, **filters) -> dict:
    """Counts and rates of the project over [start, end), in one query."""
    row = _covering(project, start, end, finest=86400, **filters).aggregate(**{name: Sum(name) for name in COUNT_FIELDS})
    return _with_rates({name: row[name] or 0 for name in COUNT_FIELDS})


def dimension_choices(project: Project, *, start: dt.datetime, end: dt.datetime, selected=None) -> dict[str, list[str]]:
    """The services, environments and agents seen in the range's rollups (one query),
    plus the selected ones, so a filter stays choosable while it matches nothing."""
    # Day rows for ranges of days (24 times fewer), hours otherwise; a little outside the range is fine here.
    resolution = ToolRollup.Resolution.DAY if end - start >= dt.timedelta(days=2) else ToolRollup.Resolution.HOUR
    seen = (
        ToolRollup.objects.filter(
            project=project, resolution=resolution, bucket_start__gte=floor_time(start, resolution), bucket_start__lt=end,
        )
        .values_list("service", "environment", "agent")
        .distinct()
        .order_by()
    )  # fmt: skip
    choices: dict[str, set[str]] = {"service": set(), "environment": set(), "agent": set()}
    for service, environment, agent in seen:
        choices["service"].add(service)
        choices["environment"].add(environment)
        choices["agent"].add(agent)
    for name, value in (selected.as_kwargs().items() if selected else ()):
        choices[name].add(value)
    return {name: sorted(values) for name, values in choices.items()}


def open_alerts(project: Project, *, limit: int = 50) -> list[Alert]:
    """Open and acknowledged alerts of the project, newest first."""
    return list(
        Alert.objects.filter(project=project, status__in=Alert.OPEN_STATUSES)
        .only("id", "tool", "kind", "status", "opened_at", "last_seen_at", "summary", "muted_until")
        .order_by("-opened_at")[:limit]
    )


def tool_alerts(project: Project, tool: str, *, limit: int = 10) -> list[Alert]:
    """A tool's open alerts first, then its most recent ones."""
    still_open = Case(When(status__in=Alert.OPEN_STATUSES, then=Value(0)), default=Value(1))
    return list(
        Alert.objects.filter(project=project, tool=tool)
        .only("id", "tool", "kind", "status", "opened_at", "last_seen_at", "resolved_at", "summary")
        .order_by(still_open, "-opened_at")[:limit]
    )


def tool_detail(project: Project, tool: str, *, start: dt.datetime, end: dt.datetime, step: int | None = None, **filters) -> dict:
    """The tool page's series: per step the counts and rates, errors by class and p50/p95/p99;
    the range's totals, latency and contract checks (passed / applicable). Every step is present
    (zeros where quiet); `has_calls` is false when the whole range is. Two queries."""
    step = step or bucket_seconds_for(start, end)
    if step < HOUR_SECONDS and start < fine_since():
        step = HOUR_SECONDS  # the five-minute rollups of that time are pruned
    filters = {"tool": tool, **filters}
    points, sums = _series(project, start=start, end=end, step=step, filters=filters, extra=_contract_sums())
    totals = totals_of(points)
    hists = {}
    if totals["calls"]:
        rows = _rollups(project, floor_time(start, step), end, _resolution_for(step), filters)
        hists = _merged_histograms(rows, BucketStart("bucket_start", step))
    for point in points:
        point.update(_latency(hists.get(point["start"], {})))
    if not totals["calls"]:
        return {"step": step, "points": points, "has_calls": False, "totals": totals, "latency": _latency({}), "contract": []}
    checks = _contract_checks(sums)
    descriptions = dict(CONTRACT_CHECKS)
    contract = [
        {"check": check, "description": descriptions[check], "passed": passed, "applicable": applicable,
         "share": passed / applicable}
        for check, (passed, applicable) in checks.items()
    ]  # fmt: skip
    totals["contract_score"] = _contract_score(checks)
    return {
        "step": step, "points": points, "has_calls": True, "totals": totals,
        "latency": _latency(histograms.merge(hists.values())), "contract": contract,
    }  # fmt: skip


def tool_baseline_hours(project: Project, tool: str, *, start: dt.datetime, end: dt.datetime, thresholds=None, **filters) -> list[dict]:
    """Hourly calls, errors, retries and escalations of a tool from the baseline week before
    `start` to `end` (one query): what `baseline_bands` needs."""
    thresholds = thresholds or DEFAULT_THRESHOLDS
    since = floor_time(start, HOUR_SECONDS) - dt.timedelta(hours=thresholds.baseline_hours + thresholds.guard_hours)
    parts = ("calls", *RATE_PARTS.values())
    filters = _check_filters(filters)
    return list(
        _rollup_model(filters).objects.filter(
            project=project, resolution=ToolRollup.Resolution.HOUR, tool=tool,
            bucket_start__gte=since, bucket_start__lt=end, **filters,
        )
        .values("bucket_start")
        .annotate(**{name: Sum(name) for name in parts})
        .order_by("bucket_start")
    )  # fmt: skip


def baseline_bands(hourly: list[dict], points: list[dict], *, thresholds=None) -> dict[str, list[dict | None]]:
    """Pure: per rate and point, the baseline the drift detectors compare with (the rate over
    the `baseline_hours` ending `guard_hours` before the point's hour, docs/drift.md) and a band
    of ± BAND_Z standard errors at the point's own call volume: binomial for errors and
    escalations (at most one per call), Poisson for retries (a call can retry many times).
    None where the point had no calls or the baseline week fewer than BAND_MIN_CALLS."""
    thresholds = thresholds or DEFAULT_THRESHOLDS
    bands: dict[str, list[dict | None]] = {metric: [] for metric in RATE_PARTS}
    if not points:
        return bands
    length, guard = thresholds.baseline_hours, thresholds.guard_hours
    origin = floor_time(points[0]["start"], HOUR_SECONDS) - dt.timedelta(hours=length + guard)
    last = floor_time(points[-1]["start"], HOUR_SECONDS)
    size = int((last - origin).total_seconds() // HOUR_SECONDS) + 1
    parts = ("calls", *RATE_PARTS.values())
    per_hour = {name: [0] * size for name in parts}
    for row in hourly:
        index = int((row["bucket_start"] - origin).total_seconds() // HOUR_SECONDS)
        if 0 <= index < size:
            for name in parts:
                per_hour[name][index] += row[name] or 0
    prefix = {name: [0, *accumulate(values)] for name, values in per_hour.items()}
    for point in points:
        window_end = int((floor_time(point["start"], HOUR_SECONDS) - origin).total_seconds() // HOUR_SECONDS) - guard
        window_start = max(window_end - length, 0)
        window_end = max(window_end, 0)
        base_calls = prefix["calls"][window_end] - prefix["calls"][window_start]
        for metric, part in RATE_PARTS.items():
            if base_calls < BAND_MIN_CALLS or not point["calls"]:
                bands[metric].append(None)
                continue
            rate = (prefix[part][window_end] - prefix[part][window_start]) / base_calls
            variance = rate if part == "retries" else rate * (1 - rate)
            spread = BAND_Z * math.sqrt(variance / point["calls"])
            high = rate + spread if part == "retries" else min(rate + spread, 1.0)
            bands[metric].append({"baseline": rate, "low": max(rate - spread, 0.0), "high": high})
    return bands


def top_fingerprints(project: Project, tool: str, *, start: dt.datetime, end: dt.datetime, limit: int = TOP_FINGERPRINTS, **filters) -> list[dict]:
    """A tool's most frequent failure fingerprints over the range (failed attempts), with first
    and last seen, the class and one sample message: one query. Without a dimension filter they
    come from the per-tool totals' `failures` (a few dozen rows, as the range's other numbers:
    the edges rounded to their five-minute buckets); with one, from the calls, grouped."""
    filters = _check_filters(filters)
    if _rollup_model(filters) is ToolRollupTotal:
        merged: dict[str, list] = {}
        for found in _covering(project, start, end, finest=86400, tool=tool).values_list("failures", flat=True):
            merge_failures(merged, found or {})
        rows = [
            {"fingerprint": fingerprint, "count": count, "first_seen": dt.datetime.fromisoformat(first),
             "last_seen": dt.datetime.fromisoformat(last), "error_class": error_class, "message": message}
            for fingerprint, (count, first, last, error_class, message) in merged.items()
        ]  # fmt: skip
        return sorted(rows, key=lambda row: (-row["count"], row["fingerprint"]))[:limit]
    return list(
        ToolCall.objects.filter(
            project=project, tool=tool, ok=False, start_time__gte=start, start_time__lt=end, **filters
        )
        .exclude(fingerprint="")
        .values("fingerprint")
        .annotate(
            count=Count("fingerprint"), first_seen=Min("start_time"), last_seen=Max("start_time"),
            error_class=Max("error_class"), message=Max("message"),
        )
        .order_by("-count", "fingerprint")[:limit]
    )  # fmt: skip


def tool_failed_calls(project: Project, tool: str, *, start: dt.datetime, end: dt.datetime, limit: int = RECENT_FAILED, **filters) -> list[ToolCall]:
    """A tool's most recent failed attempts in the range."""
    return list(
        ToolCall.objects.filter(
            project=project, tool=tool, ok=False, start_time__gte=start, start_time__lt=end, **_check_filters(filters)
        )
        .only(
            "trace_id", "span_id", "start_time", "tool", "error_class", "classified_by", "message", "service",
            "agent", "soft_failure", "latency_ms", "attempt", "fingerprint",
        )
        .order_by("-start_time")[:limit]
    )  # fmt: skip
