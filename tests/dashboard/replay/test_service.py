"""run_replay caches per range and policy, recomputes when the range's rollups change, and queues large ranges."""

from __future__ import annotations

import pytest
from django.utils import timezone

from dashboard.models import ReplayResult
from dashboard.replay import jobs
from dashboard.replay.service import ReplayError, run_replay
from dashboard.timerange import Filters
from demo import seedbench as sb
from tests.dashboard.replay.conftest import HOUR, send_seed_traffic


def test_a_small_range_is_replayed_inline_and_served_from_the_cache_after(project, seeded, django_assert_max_num_queries):
    start, end = seeded
    first = run_replay(project, start, end)

    assert first.status == ReplayResult.Status.DONE and first.progress == 100
    assert first.result["calls"] == 3 * 2 * 40
    assert set(first.result["policies"]) == {"observed", "retry_every_failure", "route_by_class", "route_by_class_with_field"}
    with django_assert_max_num_queries(4):  # the fingerprint, the row: no calls read
        again = run_replay(project, start, end)
    assert again.pk == first.pk and again.computed_at == first.computed_at


def test_one_policy_is_its_own_result_beside_the_observed(project, seeded):
    start, end = seeded

    row = run_replay(project, start, end, "route_by_class")

    assert row.policy == "route_by_class"
    assert set(row.result["policies"]) == {"observed", "route_by_class"}
    assert ReplayResult.objects.count() == 1


def test_an_unknown_policy_is_refused_by_name(project, seeded):
    with pytest.raises(ReplayError, match="unknown policy 'sometimes'"):
        run_replay(project, *seeded, "sometimes")


def test_a_change_in_the_ranges_rollups_makes_the_result_computed_again(project, seeded):
    start, end = seeded
    first = run_replay(project, start, end)

    send_seed_traffic(project, runs=1, per_run=10, strategies=("code",), seed=6)  # more calls in the same hours
    second = run_replay(project, start, end)

    assert second.pk == first.pk
    assert second.result["calls"] == first.result["calls"] + 10
    assert second.computed_at > first.computed_at


def test_filters_and_tools_select_the_calls_replayed(project, seeded):
    start, end = seeded

    generic = run_replay(project, start, end, filters=Filters(service=sb.SERVICES["generic"]))
    tool = run_replay(project, start, end, tool="lookup_customer", filters=Filters(service=sb.SERVICES["generic"]))

    assert generic.result["calls"] == 80
    assert generic.result["policies"]["observed"]["wasted_retries"]["value"] > 0
    assert 0 < tool.result["calls"] < 80 and tool.result["tool"] == "lookup_customer"
    assert {fix["tool"] for fix in tool.result["fixes"]} == {"lookup_customer"}
    assert "tools" in generic.result and "tools" not in tool.result


def test_a_large_range_is_queued_after_commit_and_the_job_computes_it_with_progress(
    project, seeded, django_capture_on_commit_callbacks, monkeypatch
):
    start, end = seeded
    queued = []
    monkeypatch.setattr("dashboard.replay.service.replay_job.delay", queued.append)

    with django_capture_on_commit_callbacks(execute=True):
        row = run_replay(project, start, end, inline_max=10)

    assert row.status == ReplayResult.Status.QUEUED and row.result is None
    assert queued == [row.pk]
    # Asked again while queued: the same row, not a second job.
    with django_capture_on_commit_callbacks(execute=True):
        assert run_replay(project, start, end, inline_max=10).pk == row.pk
    assert queued == [row.pk]
    assert jobs.replay_job_run(result_id=row.pk) is True
    assert jobs.replay_job_run(result_id=row.pk) is False  # delivered twice: computed once
    row.refresh_from_db()
    assert (row.status, row.progress) == (ReplayResult.Status.DONE, 100)
    assert row.result["calls"] == 240


def test_a_job_lost_by_its_worker_is_queued_again(project, seeded, django_capture_on_commit_callbacks, monkeypatch):
    start, end = seeded
    queued = []
    monkeypatch.setattr("dashboard.replay.service.replay_job.delay", queued.append)
    with django_capture_on_commit_callbacks(execute=True):
        row = run_replay(project, start, end, inline_max=10)
    ReplayResult.objects.filter(pk=row.pk).update(status=ReplayResult.Status.RUNNING, updated_at=timezone.now() - 2 * HOUR)

    with django_capture_on_commit_callbacks(execute=True):
        again = run_replay(project, start, end, inline_max=10)

    assert again.status == ReplayResult.Status.QUEUED and queued == [row.pk, row.pk]


def test_a_failing_computation_leaves_the_row_failed_with_its_error(project, seeded, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(jobs, "range_traffic", broken)

    row = run_replay(project, *seeded)

    assert row.status == ReplayResult.Status.FAILED and row.error == "RuntimeError: boom"


def test_a_result_computed_while_newer_data_arrived_is_not_stored_as_fresh(project, seeded, monkeypatch):
    start, end = seeded
    row = run_replay(project, start, end)
    real = jobs.range_traffic

    def newer_data_meanwhile(*args, **kwargs):
        traffic = real(*args, **kwargs)
        # A request saw newer data while this computed: it re-queued the row with the new fingerprint.
        ReplayResult.objects.filter(pk=row.pk).update(status=ReplayResult.Status.QUEUED, fingerprint="newer")
        return traffic

    monkeypatch.setattr(jobs, "range_traffic", newer_data_meanwhile)
    ReplayResult.objects.filter(pk=row.pk).update(status=ReplayResult.Status.RUNNING)
    row.refresh_from_db()
    jobs.replay_compute(row)

    row.refresh_from_db()
    assert row.status == ReplayResult.Status.QUEUED and row.fingerprint == "newer", "left for the newer job"
