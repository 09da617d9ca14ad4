"""The replay run on the seed benchmark's traffic reproduces the seed table and recovers its probabilities.

The traffic is demo/seedbench.py's (60 runs x 200 operations per strategy, seed 0), sent as
SDK spans through the real ingest path (the in-process exporter: the official encoder's
protobuf into `spans_ingest`), rolled up, then replayed per strategy's service.

Tolerance: the seed benchmark's own (demo/seedbench.py `seed_check`, docs/contract/seed-benchmark.md):
3 standard deviations of the difference of two independent draws of the scenario, counts
compared per 12,000 operations. A replay is an expectation over our draw's first failures with
probabilities estimated from our draw, so its spread is at most about one draw's: the
tolerance holds it with room (a false failure about 0.3 % per figure). The estimated
probabilities must hold the scenario's 0.70 / 0.45 / 0.90 inside their 95 % Wilson intervals.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from dashboard.replay.evidence import range_calls, range_traffic
from dashboard.replay.policies import SEED_STRATEGIES
from dashboard.replay.report import build_report
from dashboard.rollups.attempts import totals
from dashboard.rollups.refresh import rollups_recompute
from dashboard.selectors.tools import tools_table
from dashboard.timerange import Filters
from demo import seedbench as sb
from demo.simulate import IngestExporter
from demo.simulate.generator import to_ns
from ingest import partitions
from ingest.models import Project, Span, ToolCall

HOUR = dt.timedelta(hours=1)


@pytest.fixture(scope="module")
def seed_traffic(django_db_setup, django_db_blocker):
    """The seed benchmark ingested once for the module: (project, start, end, {strategy: truth})."""
    with django_db_blocker.unblock():
        partitions.forget_cache()
        now = timezone.now()
        end = now.replace(minute=0, second=0, microsecond=0)
        start = end - 2 * HOUR
        project = Project.objects.create(slug="seedbench-replay", name="Seed benchmark replay")
        operations = sb.operations(seed=0, runs=sb.RUNS, per_run=sb.OPERATIONS)
        exporter = IngestExporter(project, now=now)
        truths = {}
        for strategy in sb.STRATEGIES:
            traffic = sb.build_traffic(
                strategy, operations, seed=0, start_ns=to_ns(start), run_spacing_ns=(to_ns(end) - to_ns(start)) // sb.RUNS
            )
            for index in range(0, len(traffic.spans), 5000):
                exporter.export(traffic.spans[index : index + 5000])
            truths[strategy] = traffic.truth.as_dict()
        rollups_recompute(project_id=project.pk, start=start, end=end + HOUR)
        yield project, start, end + HOUR, truths
        Span.objects.filter(project=project).delete()
        ToolCall.objects.filter(project=project).delete()
        project.delete()
        partitions.forget_cache()


def _report(seed_traffic, strategy: str, tool: str = "") -> dict:
    project, start, end, _ = seed_traffic
    tools = range_traffic(project, start, end, Filters(service=sb.SERVICES[strategy]))
    return build_report(tools, tool=tool, range_seconds=(end - start).total_seconds())


def _seed_value(figures: dict, figure: str) -> float:
    return figures[figure]["value"]


@pytest.mark.parametrize("strategy", sb.STRATEGIES)
def test_replaying_any_strategys_traffic_reproduces_the_whole_seed_table(seed_traffic, strategy, db):
    report = _report(seed_traffic, strategy)

    assert report["calls"] == sb.RUNS * sb.OPERATIONS
    misses = []
    for policy, seed_strategy in SEED_STRATEGIES.items():
        for figure in sb.FIGURES:
            value = _seed_value(report["policies"][policy], figure)
            within, scaled, tol = sb.seed_check(seed_strategy, figure, value, report["calls"])
            print(f"{strategy} traffic, {policy}: {figure} {scaled:.4f} (seed {sb.SEED_TABLE[seed_strategy][figure]}, ±{tol:.4f})")
            if not within:
                misses.append((policy, figure, scaled, sb.SEED_TABLE[seed_strategy][figure], tol))
    assert misses == []


@pytest.mark.parametrize("strategy", sb.STRATEGIES)
def test_the_observed_policy_is_the_rollups_own_counts(seed_traffic, strategy, db):
    project, start, end, truths = seed_traffic

    observed = _report(seed_traffic, strategy)["policies"]["observed"]

    rows = tools_table(project, start=start, end=end, service=sb.SERVICES[strategy])
    calls = sum(row["calls"] for row in rows)
    assert observed["calls"] == calls == truths[strategy]["calls"]
    assert observed["resolved"] == sum(row["resolved"] for row in rows) == truths[strategy]["resolved"]
    assert observed["failed_retries"]["value"] == sum(row["failed_retries"] for row in rows)
    assert observed["wasted_retries"]["value"] == sum(row["wasted_retries"] for row in rows)
    assert observed["attempts_per_call"]["value"] == sum(row["attempts"] for row in rows) / calls
    assert observed["resolution_rate"]["source"] == "observed"


def _evidence(report: dict, error_class: str, move: str, hinted: bool) -> dict:
    (row,) = [r for r in report["evidence"] if (r["error_class"], r["move"], r["hinted"]) == (error_class, move, hinted)]
    return row


def test_the_estimated_probabilities_recover_the_scenarios_70_45_and_90_percent(seed_traffic, db):
    generic, code, envelope = (_report(seed_traffic, strategy) for strategy in sb.STRATEGIES)

    transient = _evidence(generic, "transient", "retry", False)
    unguided = _evidence(code, "validation", "repair", False)
    guided = _evidence(envelope, "validation", "repair", True)
    print("estimates:", transient, unguided, guided, sep="\n")
    assert transient["low"] <= sb.TRANSIENT_RETRY_SUCCESS <= transient["high"], transient
    assert unguided["low"] <= sb.REPAIR_SUCCESS["code"] <= unguided["high"], unguided
    assert guided["low"] <= sb.REPAIR_SUCCESS["envelope"] <= guided["high"], guided
    # The envelope's transient failures carry retryAfterMs: their retries are the hinted evidence.
    told = _evidence(envelope, "transient", "retry", True)
    assert told["low"] <= sb.TRANSIENT_RETRY_SUCCESS <= told["high"], told
    # A blind retry of the generic strategy never fixes validation or a permanent class.
    assert _evidence(generic, "validation", "retry", False)["successes"] == 0
    assert _evidence(generic, "permission", "retry", False)["successes"] == 0


def test_each_figure_says_whether_it_comes_from_the_data_or_the_seeds_assumptions(seed_traffic, db):
    generic = _report(seed_traffic, "generic")["policies"]
    envelope = _report(seed_traffic, "envelope")["policies"]

    # The generic controller never repaired: a routed repair rests on the seed's 45 % / 90 %.
    assert generic["retry_every_failure"]["resolution_rate"]["source"] == "data"
    assert generic["route_by_class"]["resolution_rate"]["source"] == "mixed"
    assert 0 < generic["route_by_class"]["resolution_rate"]["from_data"] < 1
    # The envelope's traffic has guided repairs of its own.
    assert envelope["route_by_class_with_field"]["resolution_rate"]["source"] == "data"
    # Attempts and wasted retries follow from the failures and the policy alone.
    assert generic["route_by_class"]["wasted_retries"]["value"] == 0
    assert generic["route_by_class"]["wasted_retries"]["low"] == generic["route_by_class"]["wasted_retries"]["high"]


def test_on_the_generic_traffic_stating_the_class_is_the_first_fix_and_ends_permanent_failure_retries(seed_traffic, db):
    report = _report(seed_traffic, "generic")
    observed = report["policies"]["observed"]

    by_tool = {}
    for fix in report["fixes"]:
        by_tool.setdefault(fix["tool"], []).append(fix)
    assert set(by_tool) == set(sb.TOOLS)
    for tool, fixes in by_tool.items():
        assert fixes[0]["fix"] == "explicit_class", (tool, fixes)
        assert fixes[0]["wasted_retries"] < 0 and fixes[0]["resolved"] > 0
    saved = -sum(fixes[0]["wasted_retries"] for fixes in by_tool.values())
    assert saved == observed["wasted_retries"]["value"]


def test_the_replayed_calls_are_the_linked_calls_of_the_range(seed_traffic, db):
    project, start, end, truths = seed_traffic

    calls = range_calls(project, start, end, Filters(service=sb.SERVICES["code"]))

    counted = totals(calls)
    assert (counted.calls, counted.failed_retries) == (truths["code"]["calls"], truths["code"]["failed_retries"])
