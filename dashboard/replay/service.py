"""run_replay: a project's policy replay over a range, cached, inline or as a job (docs/replay.md#jobs-and-caching).

A result is kept per (project, tool, policy, range, filters) in ReplayResult. It is served
again while the range's rollups are unchanged (evidence.range_state's fingerprint); otherwise,
or on the first request, it is computed: inline when the range holds at most INLINE_MAX_CALLS
logical calls, else queued for the Celery job (dashboard/replay/tasks.py) after commit, and
the row (queued, then running with its progress) is returned at once. Ranges are aligned to the
rollups' 5-minute buckets, so a preset range asked twice within a few minutes is one result.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.models import ReplayResult
from dashboard.replay import jobs
from dashboard.replay.evidence import range_state
from dashboard.replay.policies import POLICIES
from dashboard.replay.report import VERSION
from dashboard.replay.tasks import replay_job
from dashboard.rollups.rows import BUCKET, floor_time
from dashboard.timerange import Filters
from ingest.models import Project

INLINE_MAX_CALLS = 20_000
# A queued or running job not heard of for this long is taken for lost (a worker gone) and queued
# again: longer than a task may run (its hard time limit), so a live job is never run twice.
JOB_TIMEOUT = dt.timedelta(seconds=max(15 * 60, settings.CELERY_TASK_TIME_LIMIT + 5 * 60))


class ReplayError(ValueError):
    """A request that cannot be replayed (an unknown policy); the message names the problem."""


def align(moment: dt.datetime) -> dt.datetime:
    return floor_time(moment, int(BUCKET.total_seconds()))


def run_replay(
    project: Project,
    start: dt.datetime,
    end: dt.datetime,
    policy: str = "",
    *,
    tool: str = "",
    filters: Filters | None = None,
    inline_max: int | None = None,
    now: dt.datetime | None = None,
) -> ReplayResult:
    """The replay of [start, end) (aligned to 5 minutes) for `tool` ("" = the project) and `policy`
    ("" = all four): done from the cache or inline, or a queued / running job with its progress."""
    if policy and policy not in POLICIES:
        raise ReplayError(f"unknown policy {policy!r}; the policies are {', '.join(POLICIES)}")
    now = now or timezone.now()
    start, end = align(start), align(end)
    if end <= start:
        end = start + BUCKET
    filters = filters or Filters()
    params = {"filters": filters.params(), "version": VERSION}
    params_hash = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
    size, fingerprint = range_state(project, start, end, filters)
    key = dict(project=project, tool=tool, policy=policy, start=start, end=end, params_hash=params_hash)
    row = ReplayResult.objects.filter(**key).first()
    if row is None:
        try:
            with transaction.atomic():
                row = ReplayResult.objects.create(**key, params=params, fingerprint=fingerprint, created_at=now, updated_at=now)
        except IntegrityError:  # another request made it first: use that one
            row = ReplayResult.objects.get(**key)
    else:
        fresh = row.fingerprint == fingerprint
        if row.status == ReplayResult.Status.DONE and fresh:
            return row
        if row.status in (ReplayResult.Status.QUEUED, ReplayResult.Status.RUNNING) and fresh and now - row.updated_at < JOB_TIMEOUT:
            return row
        # Out of date, failed or lost: computed again, from the same row.
        ReplayResult.objects.filter(pk=row.pk).update(
            status=ReplayResult.Status.QUEUED, progress=0, error="", fingerprint=fingerprint, updated_at=now
        )
        row.refresh_from_db()
    row.project = project
    if size > (INLINE_MAX_CALLS if inline_max is None else inline_max):
        transaction.on_commit(partial(replay_job.delay, row.pk), robust=True)
        return row
    ReplayResult.objects.filter(pk=row.pk).update(status=ReplayResult.Status.RUNNING, updated_at=now)
    row.status = ReplayResult.Status.RUNNING
    return jobs.replay_compute(row)
