"""A small seed-benchmark traffic in the cast's project, ingested and rolled up (for the service, API and page tests)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.rollups.refresh import rollups_recompute
from demo import seedbench as sb
from demo.simulate import IngestExporter
from demo.simulate.generator import to_ns
from ingest import partitions

HOUR = dt.timedelta(hours=1)


def send_seed_traffic(project, *, runs: int = 2, per_run: int = 40, strategies=sb.STRATEGIES, hours: int = 2, seed: int = 5):
    """Seed-benchmark traffic in the last `hours` whole hours, through ingest, rolled up; returns (start, end)."""
    partitions.forget_cache()
    now = timezone.now()
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - hours * HOUR
    operations = sb.operations(seed=seed, runs=runs, per_run=per_run)
    exporter = IngestExporter(project, now=now)
    for strategy in strategies:
        traffic = sb.build_traffic(
            strategy, operations, seed=seed, start_ns=to_ns(start), run_spacing_ns=(to_ns(end) - to_ns(start)) // runs
        )
        exporter.export(traffic.spans)
    rollups_recompute(project_id=project.pk, start=start, end=end + HOUR)
    return start, end


@pytest.fixture
def seeded(project):
    """The cast's project with 2 runs x 40 operations of each seed strategy in the last two hours."""
    return send_seed_traffic(project)
