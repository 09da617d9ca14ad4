"""The Quickstart's demo data: a month of agent traffic with a drift, ready to browse.

`demo_history_load` sends the simulated fleet's history (demo.simulate) through the
official encoder into the demo project, in process, recomputes the rollups and runs the
drift evaluation once, so the first page already has trends, an open
`retry_rise_flat_error` alert and failed traces to promote. The history is seeded per
hour: loading the same hours again stores nothing twice, and a later load only tops up
the hours since the newest stored call.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import time
from dataclasses import dataclass

from django.db.models import Max
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from dashboard.alerting.evaluation import drift_evaluate
from dashboard.models import Alert
from dashboard.rollups.refresh import rollups_refresh
from demo.simulate import DriftSpec, IngestExporter, SendStats, Simulator, backfill
from demo.simulate import profiles as pf
from demo.simulate.generator import RETRY_RISE_FLAT_ERROR
from ingest.models import Project, ToolCall

DEMO_SLUG = "demo-agents"
DEMO_NAME = "Demo agents"
DEMO_SEED = 7
DEMO_DAYS = 30
# Tool calls per hour in all at full volume (the last DENSE_DAYS; older days at SPARSE_FACTOR).
# search_kb, the drifting tool, gets about 28 of them: enough for the detector's minimum
# of 100 calls in its 6-hour window even at the quiet hours of the daily cycle.
DEMO_RATE = 120.0
DENSE_DAYS = 7
SPARSE_FACTOR = 0.15
# The drift the demo shows: search_kb's retries climb while its error rate stays flat.
# It starts a few hours back (from the hour, so a reload within the hour is identical),
# inside the detector's recent windows and after its baseline, which ends 6 h back.
DRIFT_TOOL = "search_kb"
DRIFT_KIND = RETRY_RISE_FLAT_ERROR
DRIFT_HOURS_AGO = 9
ESCALATION_TOOLS = ["handoff_to_human"]


@dataclass
class DemoLoad:
    stats: SendStats
    start: dt.datetime
    end: dt.datetime
    open_alerts: list[Alert]


def demo_simulator(*, now: dt.datetime, rate: float = DEMO_RATE, seed: int = DEMO_SEED) -> Simulator:
    """The demo fleet, with the demo drift in force from DRIFT_HOURS_AGO hours before `now`'s hour."""
    hour = now.replace(minute=0, second=0, microsecond=0)
    drift = DriftSpec(DRIFT_TOOL, DRIFT_KIND, hour - dt.timedelta(hours=DRIFT_HOURS_AGO))
    return Simulator(
        seed=seed, rate=rate, drifts=(drift,), dense_since=hour - dt.timedelta(days=DENSE_DAYS), sparse_factor=SPARSE_FACTOR,
        escalation_tools=frozenset(ESCALATION_TOOLS),
    )  # fmt: skip


def demo_history_load(
    *, project: Project, now: dt.datetime, days: float = DEMO_DAYS, rate: float = DEMO_RATE, seed: int = DEMO_SEED
) -> DemoLoad:
    """Load (or top up) `days` of demo history ending `now` into `project`, then run the
    rollups and the drift evaluation once. Never stores a span twice."""
    oldest = now - dt.timedelta(days=min(days, project.retention_days)) + dt.timedelta(hours=1)
    newest = ToolCall.objects.filter(project=project).aggregate(newest=Max("start_time"))["newest"]
    # Top up from the hour after the newest stored call: that hour may hold live traffic.
    start = max(oldest, newest.replace(minute=0, second=0, microsecond=0) + dt.timedelta(hours=1)) if newest else oldest
    sim = demo_simulator(now=now, rate=rate, seed=seed)
    try:
        stats = backfill(sim, IngestExporter(project, now=now), start=start, end=now) if start < now else SendStats()
    finally:
        sim.shutdown()
    if stats.spans:  # nothing new: the worker's schedule keeps rollups and alerts current
        rollups_refresh(project_id=project.pk, now=now, everything=True)  # the history is due at once
        drift_evaluate(project_id=project.pk, now=now)
    alerts = list(Alert.objects.filter(project=project, status__in=Alert.OPEN_STATUSES).order_by("tool", "kind"))
    return DemoLoad(stats=stats, start=start, end=now, open_alerts=alerts)


def _failure_heavy(profile: pf.Profile) -> pf.Profile:
    """The fleet with every tool failing three times as often and repairs half the time,
    so that a sample of a few dozen traces shows every kind of failure."""
    tools = {
        name: dataclasses.replace(tool, error_rate=min(0.6, tool.error_rate * 3), repair_success=0.5)
        for name, tool in profile.tools.items()
    }
    return dataclasses.replace(profile, tools=tools)


def demo_request(*, seed: int = 7, traces: int = 240, hours: int = 24, now_ns: int | None = None):
    """An ExportTraceServiceRequest of exactly `traces` traces of a failure-heavy demo fleet,
    starting within the `hours` before `now_ns`, deployments taken in turn. Deterministic for
    a seed and `now_ns`. For tests that need a small, varied sample."""
    rng = random.Random(seed)
    now_ns = now_ns or time.time_ns()
    sim = Simulator(seed=seed, profile=_failure_heavy(pf.DEFAULT_PROFILE), escalation_tools=frozenset(ESCALATION_TOOLS))
    spans = []
    for number in range(traces):
        start_ns = now_ns - rng.randint(60, hours * 3600) * 10**9
        spans += sim.session_at(number % len(sim.deployments), start_ns, random.Random(f"{seed}:{number}")).spans
    sim.shutdown()
    return encode_spans(spans)
