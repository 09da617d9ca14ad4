"""The seed benchmark: Toolwatch's figures from real OTLP ingest equal the generator's ground truth."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.db import connection

from demo import seedbench as sb
from ingest import partitions


@pytest.fixture
def server_cleanup(transactional_db):
    """seedbench serves itself with waitress in a thread, which holds its own connections."""
    partitions.forget_cache()
    yield
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    partitions.forget_cache()


def run_seedbench(*args) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("seedbench", *args, stdout=out)
        code = 0
    except SystemExit as exit:
        code = exit.code
    return out.getvalue(), code


def test_a_small_seed_benchmark_over_http_equals_the_ground_truth_exactly(server_cleanup):
    output, code = run_seedbench("--runs", "6", "--ops", "50", "--seed", "3")

    assert code != 1, output
    lines = output.strip().splitlines()
    assert "over OTLP/HTTP" in lines[0]
    result = json.loads(lines[-1])
    assert set(result) == {"generic", "code", "envelope"}
    for strategy, figures in result.items():
        assert figures["toolwatch"] == figures["ground_truth"], strategy
        assert figures["toolwatch"]["calls"] == 300
    generic, code_only = result["generic"]["toolwatch"], result["code"]["toolwatch"]
    # Classified from the HTTP status or exception type the span kept, not from "Something went wrong".
    assert generic["err_unknown"] == 0 and generic["wasted_retries"] > 0
    assert code_only["wasted_retries"] == 0
    assert result["envelope"]["toolwatch"]["resolved"] >= code_only["resolved"]
    assert sum(" PASS " in line for line in lines) == 12


def test_every_strategy_gets_the_same_operations_and_rolls():
    first = sb.operations(seed=1, runs=2, per_run=30)

    assert first == sb.operations(seed=1, runs=2, per_run=30)
    assert {op.failure for run in first for op in run} == {"", "transient", "validation", "permission", "not_found"}


def test_the_scenario_probabilities_reproduce_the_seed_table_within_its_tolerance():
    for strategy in sb.STRATEGIES:
        p = sb.expected_probabilities(strategy)
        expected = {
            "resolution_rate": p["resolved"], "attempts_per_call": 1 + p["retried"],
            "failed_retries": p["failed_retry"] * sb.SEED_OPERATIONS, "wasted_retries": p["wasted_retry"] * sb.SEED_OPERATIONS,
        }  # fmt: skip
        for figure, value in expected.items():
            within, _, tolerance = sb.seed_check(strategy, figure, value, sb.SEED_OPERATIONS)
            assert within, (strategy, figure, value, sb.SEED_TABLE[strategy][figure], tolerance)
