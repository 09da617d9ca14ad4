"""Computing a replay into its ReplayResult row (docs/replay.md#jobs-and-caching): inline or from the Celery job.

`replay_compute` reads the range's calls (dashboard/replay/evidence.py), builds the report
(dashboard/replay/report.py) and stores it, writing the row's progress as it goes. A job
first claims its row with a conditional UPDATE (queued -> running) that must change exactly
one row, so a task delivered twice computes once.
"""

from __future__ import annotations

import logging

from django.utils import timezone

from dashboard.models import ReplayResult
from dashboard.replay.evidence import range_traffic
from dashboard.replay.policies import POLICIES
from dashboard.replay.report import build_report
from dashboard.timerange import Filters

log = logging.getLogger(__name__)

# Progress: reading and linking the calls is most of the work; building the report the rest.
LOADED, DONE = 40, 100


def _progress(row: ReplayResult, value: int) -> None:
    if value != row.progress:
        row.progress = value
        ReplayResult.objects.filter(pk=row.pk).update(progress=value, updated_at=timezone.now())


def replay_compute(row: ReplayResult) -> ReplayResult:
    """Compute the row's replay now and store it (status done, or failed with the error)."""
    filters = Filters(**row.params.get("filters", {}))
    # The data the result is of. Saved only while the row still names it: a request that saw
    # newer data meanwhile re-queued the row with a new fingerprint, and this result is stale.
    claimed = ReplayResult.objects.filter(pk=row.pk, fingerprint=row.fingerprint)
    try:
        _progress(row, 5)
        tools = range_traffic(row.project, row.start, row.end, filters)
        _progress(row, LOADED)
        policies = (row.policy,) if row.policy else tuple(POLICIES)
        result = build_report(
            tools, tool=row.tool, policies=policies, range_seconds=(row.end - row.start).total_seconds(),
            progress=lambda share: _progress(row, LOADED + (DONE - LOADED - 1) * share // 100),
        )  # fmt: skip
    except Exception as exc:  # the row says so, the page and the API show it; the log has the trace
        log.exception("replay %s failed", row.pk)
        row.status, row.error, row.updated_at = ReplayResult.Status.FAILED, f"{type(exc).__name__}: {exc}", timezone.now()
        claimed.update(status=row.status, error=row.error, updated_at=row.updated_at)
        return row
    now = timezone.now()
    row.result, row.status, row.progress, row.error = result, ReplayResult.Status.DONE, DONE, ""
    row.computed_at = row.updated_at = now
    if not claimed.update(result=result, status=row.status, progress=DONE, error="", computed_at=now, updated_at=now):
        log.info("replay %s: the range changed while it was computed; the newer job stores its result", row.pk)
        row.refresh_from_db()
    return row


def replay_job_run(*, result_id: int) -> bool:
    """The job: claim the queued row and compute it; False when another worker has it (or it is gone)."""
    claimed = ReplayResult.objects.filter(pk=result_id, status=ReplayResult.Status.QUEUED).update(
        status=ReplayResult.Status.RUNNING, progress=1, updated_at=timezone.now()
    )
    if claimed != 1:
        return False
    replay_compute(ReplayResult.objects.select_related("project").get(pk=result_id))
    return True
