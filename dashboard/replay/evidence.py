"""A project's logical calls in a range, linked by the rollups' own code, summarised for a replay.

The attempts are read and linked exactly as the rollups' Python path reads and links them
(dashboard/rollups/python_path.py `load_attempts`, dashboard/rollups/attempts.py
`link_attempts`, with LINK_SLACK on each side so calls crossing the range's edges link whole),
so the observed figures of a replay are the rollups' counts for the range. The range's size and
fingerprint come from the rollups, which is cheap.
"""

from __future__ import annotations

import datetime as dt
import hashlib

from django.db.models import Count, Max, Sum

from dashboard.models import RolledUpBucket, ToolRollup, ToolRollupTotal
from dashboard.replay.traffic import ToolTraffic, summarise
from dashboard.rollups.attempts import LogicalCall, link_attempts
from dashboard.rollups.python_path import load_attempts
from dashboard.rollups.rows import LINK_SLACK, floor_time
from dashboard.timerange import Filters
from ingest.models import Project


def range_calls(project: Project, start: dt.datetime, end: dt.datetime, filters: Filters | None = None) -> list[LogicalCall]:
    """The logical calls whose first attempt started in [start, end), of the filters' service, environment, agent."""
    wanted = filters.as_kwargs() if filters else {}
    calls = []
    for call in link_attempts(load_attempts(project.pk, start - LINK_SLACK, end + LINK_SLACK)):
        first = call.first
        if start <= first.start < end and all(getattr(first, name) == value for name, value in wanted.items()):
            calls.append(call)
    return calls


def range_traffic(project: Project, start: dt.datetime, end: dt.datetime, filters: Filters | None = None) -> dict[str, ToolTraffic]:
    return summarise(range_calls(project, start, end, filters))


def range_state(project: Project, start: dt.datetime, end: dt.datetime, filters: Filters | None = None) -> tuple[int, str]:
    """(logical calls in the range by the rollups, a fingerprint of the range's rollups).

    The hourly rows covering the range and when the range's 5-minute buckets were last rolled
    up: a span arriving in the range changes them within a refresh, so a cached result whose
    fingerprint differs is out of date. With filters, the calls are counted from the rows of
    those dimensions (the fingerprint stays the project's: any change in the range counts).
    """
    hours = dict(project=project, resolution=ToolRollup.Resolution.HOUR, bucket_start__gte=floor_time(start, 3600),
                 bucket_start__lt=end)  # fmt: skip
    state = ToolRollupTotal.objects.filter(**hours).aggregate(
        rows=Count("id"), calls=Sum("calls"), attempts=Sum("attempts"), resolved=Sum("resolved"),
        failed=Sum("failed_retries"), errors=Sum("errors"),
    )  # fmt: skip
    computed = RolledUpBucket.objects.filter(project=project, bucket_start__gte=start, bucket_start__lt=end).aggregate(
        at=Max("computed_at")
    )["at"]
    wanted = filters.as_kwargs() if filters else {}
    if wanted:
        calls = ToolRollup.objects.filter(**hours, **wanted).aggregate(calls=Sum("calls"))["calls"] or 0
    else:
        calls = state["calls"] or 0
    text = "|".join(str(state[name] or 0) for name in sorted(state)) + f"|{computed.isoformat() if computed else ''}"
    return calls, hashlib.sha256(text.encode()).hexdigest()[:32]
