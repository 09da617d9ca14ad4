"""Reads for the ingest health page and API: what arrived per hour, what was refused and why, the keys.

`ingest.IngestStat` holds one counter per (project, hour, outcome, reason); one query reads
the range's rows and `ingest_health_from_rows` (pure) shapes them into the chart's series,
the totals and the by-reason table.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass

from django.db.models import Sum

from dashboard.rollups.rows import floor_time
from ingest.models import ApiKey, IngestStat, Project

# What arrived: accepted, duplicate, rejected, refused. "cut" counts values inside stored spans
# (the input bounds, docs/contract/limits.md#what-was-cut): listed apart, never added to arrivals.
OUTCOMES = tuple(outcome for outcome in IngestStat.Outcome.values if outcome != IngestStat.Outcome.CUT)
PROBLEM_OUTCOMES = (IngestStat.Outcome.REJECTED, IngestStat.Outcome.REFUSED)
HOUR = dt.timedelta(hours=1)
# Counters are kept per five minutes (ingest.services.ingest_stats_add; hourly before): ranges up
# to FINE_RANGE are drawn at five minutes, longer ones per hour (older rows sit on the hour anyway).
FINE_STEP = 300
FINE_RANGE = dt.timedelta(hours=6)


def health_step(start: dt.datetime, end: dt.datetime) -> int:
    """The chart's step in seconds: five minutes for short ranges, else an hour."""
    return FINE_STEP if end - start <= FINE_RANGE else 3600


@dataclass(frozen=True)
class ReasonTotal:
    outcome: str  # rejected (spans) or refused (requests)
    reason: str
    count: int


@dataclass(frozen=True)
class IngestHealth:
    hours: list[dt.datetime]  # every step of the range, oldest first (an hour, or five minutes: `step`)
    series: dict[str, list[int]]  # outcome -> a count per hour of `hours`
    reasons_by_hour: dict[str, list[dict[str, int]]]  # rejected/refused -> per hour {reason: count}
    totals: dict[str, int]  # outcome -> count over the range
    reasons: list[ReasonTotal]  # rejections and refusals by reason, most frequent first
    cuts: list[ReasonTotal] = ()  # values cut to the input bounds, by limit, most frequent first
    step: int = 3600  # seconds per entry of `hours`

    @property
    def cut_total(self) -> int:
        return sum(row.count for row in self.cuts)

    @property
    def is_empty(self) -> bool:
        return not any(self.totals.values())


def ingest_stat_rows(project: Project, start: dt.datetime, end: dt.datetime, step: int = 3600) -> list[dict]:
    """The project's counters of the steps that overlap [start, end): hour (a bucket's start), outcome, reason, count."""
    return list(
        IngestStat.objects.filter(project=project, hour__gte=floor_time(start, step), hour__lt=end)
        .values("hour", "outcome", "reason")
        .annotate(total=Sum("count"))
        .order_by("hour", "outcome", "reason")
    )


def ingest_health_from_rows(rows: list[dict], start: dt.datetime, end: dt.datetime, step: int = 3600) -> IngestHealth:
    """Shape counter rows into zero-filled series per step (an hour, or five minutes: health_step),
    totals and the by-reason table (pure)."""
    first = floor_time(start, step)
    hours = []
    hour = first
    while hour < end:
        hours.append(hour)
        hour += dt.timedelta(seconds=step)
    index = {moment: position for position, moment in enumerate(hours)}
    series = {outcome: [0] * len(hours) for outcome in OUTCOMES}
    reasons_by_hour = {outcome: [defaultdict(int) for _ in hours] for outcome in PROBLEM_OUTCOMES}
    totals: Counter = Counter({outcome: 0 for outcome in OUTCOMES})
    by_reason: Counter = Counter()
    cuts: Counter = Counter()
    for row in rows:
        position = index.get(floor_time(row["hour"], step))
        outcome, count = row["outcome"], int(row["total"] or 0)
        if outcome == IngestStat.Outcome.CUT:
            cuts[row["reason"] or "(no limit given)"] += count
            continue
        if outcome not in series:
            continue
        totals[outcome] += count
        if position is not None:
            series[outcome][position] += count
        if outcome in reasons_by_hour:
            reason = row["reason"] or "(no reason given)"
            by_reason[(outcome, reason)] += count
            if position is not None:
                reasons_by_hour[outcome][position][reason] += count
    return IngestHealth(
        step=step,
        hours=hours,
        series=series,
        reasons_by_hour={outcome: [dict(r) for r in per_hour] for outcome, per_hour in reasons_by_hour.items()},
        totals=dict(totals),
        reasons=[
            ReasonTotal(outcome, reason, count)
            for (outcome, reason), count in sorted(by_reason.items(), key=lambda item: (-item[1], item[0]))
        ],
        cuts=[
            ReasonTotal(IngestStat.Outcome.CUT, limit, count)
            for limit, count in sorted(cuts.items(), key=lambda item: (-item[1], item[0]))
        ],
    )


def ingest_health(project: Project, start: dt.datetime, end: dt.datetime, step: int = 3600) -> IngestHealth:
    """Per hour (the API's shape), or per `step` (the page passes health_step: five minutes for short ranges)."""
    return ingest_health_from_rows(ingest_stat_rows(project, start, end, step), start, end, step)


def has_received_anything(project: Project) -> bool:
    """Whether any request ever reached this project's ingest (accepted or not)."""
    return IngestStat.objects.filter(project=project).exists()


def api_keys_for_project(project: Project) -> list[ApiKey]:
    """The project's keys, newest first: what tells them apart, never the key (only its hash is stored anyway)."""
    return list(
        ApiKey.objects.filter(project=project)
        .only("project_id", "name", "prefix", "created_at", "last_used_at", "revoked_at")
        .order_by("-created_at", "-id")
    )
