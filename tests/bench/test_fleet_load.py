"""bench/fleet_load.py: the demo fleet's seed block, decoded by ingest, copied in SQL."""

import datetime as dt

import pytest
from django.db import connection

from bench import fleet_load
from ingest import partitions
from ingest.storage import SPAN_COLUMNS, TOOLCALL_COLUMNS

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SEED_START = dt.datetime.combine(fleet_load.ANCHOR, dt.time(10), tzinfo=dt.UTC)
# Three copies: a day, a day and an hour, two days later.
SHIFTS = [dt.timedelta(days=1), dt.timedelta(days=1, hours=1), dt.timedelta(days=2)]
TIMES = ("start_time", "end_time", "received_at")


@pytest.fixture(autouse=True)
def _clean():
    # Partitions and the staging tables are tables a flush between tests does not remove.
    partitions.drop_partitions_before(dt.date(9999, 1, 1))
    yield
    fleet_load.drop_stage()
    partitions.drop_partitions_before(dt.date(9999, 1, 1))


def _url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}"


def _project_id() -> int:
    from tests.factories import make_project

    return make_project().pk


def _one(sql: str, params=()) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _seed(project_id: int) -> fleet_load.SeedBlock:
    """Ten minutes of the fleet at 3,000 calls an hour: about 500 tool calls."""
    return fleet_load.seed_block(
        project_id=project_id, start=SEED_START, end=SEED_START + dt.timedelta(minutes=10), rate=3000, seed=3
    )


def _copy_differences(stage: str, table: str, columns, k: int, shift: dt.timedelta, skip=()) -> int:
    """Rows of copy k that differ from the seed block once the trace id prefix and the time shift are undone."""
    # A span's attributes, events and links and a call's arguments and result are json, which has
    # no equality: compared as jsonb.
    kept = [f"{c}::jsonb" if c in ("attributes", "events", "links", "arguments", "result") else c
            for c in columns if c not in TIMES and c != "trace_id" and c not in skip]  # fmt: skip
    copy = ", ".join(["substr(trace_id, 9)", *(f"{c} - %(shift)s" for c in TIMES), *kept])
    seed = ", ".join(["substr(trace_id, 9)", *TIMES, *kept])
    params = {"shift": shift, "prefix": f"{k:08x}"}
    copy_rows = f"SELECT {copy} FROM {table} WHERE left(trace_id, 8) = %(prefix)s"
    return _one(
        f"SELECT (SELECT count(*) FROM ({copy_rows} EXCEPT ALL SELECT {seed} FROM {stage}) a)"
        f" + (SELECT count(*) FROM (SELECT {seed} FROM {stage} EXCEPT ALL {copy_rows}) b)",
        params,
    )[0]


def test_the_seed_block_holds_the_fleets_traces_decoded_by_ingest():
    project_id = _project_id()

    block = _seed(project_id)

    assert 300 < block.calls < 800
    assert block.spans > block.calls  # agent and chat spans besides the tool spans
    assert 0 < block.failed < block.calls
    stored, conventions = _one(f"SELECT count(*), count(DISTINCT convention) FROM {fleet_load.CALL_STAGE}")
    assert stored == block.calls and conventions >= 2  # tool spans of several conventions were recognised
    # Every tool call knows its agent: a session's spans are decoded together.
    assert _one(f"SELECT count(*) FROM {fleet_load.CALL_STAGE} WHERE agent = ''") == (0,)
    first, last = _one(f"SELECT min(start_time), max(end_time) FROM {fleet_load.SPAN_STAGE}")
    assert SEED_START <= first and last <= SEED_START + dt.timedelta(minutes=10)


def test_the_seed_block_is_the_same_for_the_same_seed():
    project_id = _project_id()
    calls = f"SELECT string_agg(trace_id || span_id || ok::text, ',' ORDER BY trace_id, span_id) FROM {fleet_load.CALL_STAGE}"
    _seed(project_id)
    first = _one(calls)

    _seed(project_id)

    assert _one(calls) == first


def test_each_copy_is_the_seed_block_with_new_trace_ids_and_shifted_times():
    project_id = _project_id()
    block = _seed(project_id)
    partitions.ensure_partitions({(SEED_START + shift).date() for shift in SHIFTS})

    spans, calls = fleet_load.replicate(_url(), shifts=SHIFTS, workers=2)

    assert (spans, calls) == (3 * block.spans, 3 * block.calls)
    assert _one("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM ingest_span") == (spans, spans)
    assert _one("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM ingest_toolcall") == (calls, calls)
    assert _one("SELECT count(DISTINCT trace_id) FROM ingest_span") == (3 * block.traces,)
    assert _one("SELECT bool_and(trace_id ~ '^[0-9a-f]{32}$') FROM ingest_span") == (True,)
    assert _one("SELECT array_agg(DISTINCT left(trace_id, 8) ORDER BY left(trace_id, 8)) FROM ingest_toolcall") == (
        ["00000000", "00000001", "00000002"],
    )
    for k, shift in enumerate(SHIFTS):
        stage, table = fleet_load.CALL_STAGE, "ingest_toolcall"
        assert _copy_differences(stage, table, TOOLCALL_COLUMNS, k, shift) == 0, f"copy {k}"
        assert _copy_differences(fleet_load.SPAN_STAGE, "ingest_span", SPAN_COLUMNS, k, shift, skip=("events",)) == 0
        # Event times move with their spans.
        moved = _one(
            "SELECT bool_and((c.events::jsonb -> 0 ->> 'time_ns')::bigint - (s.events::jsonb -> 0 ->> 'time_ns')::bigint = %s), count(*) "
            f"FROM ingest_span c JOIN {fleet_load.SPAN_STAGE} s ON substr(c.trace_id, 9) = substr(s.trace_id, 9) "
            "AND c.span_id = s.span_id WHERE left(c.trace_id, 8) = %s AND s.events::jsonb <> '[]'::jsonb",
            [shift // dt.timedelta(microseconds=1) * 1000, f"{k:08x}"],
        )
        assert moved[0] is True and moved[1] > 0


def test_fleet_history_puts_the_seed_day_on_each_day():
    project_id = _project_id()
    first_day = dt.date(2026, 11, 1)
    partitions.ensure_partitions(first_day + dt.timedelta(days=i) for i in range(3))

    history = fleet_load.fleet_history(
        _url(), project_id=project_id, first_day=first_day, days=2, calls=600, seed=5, log=lambda message: None
    )

    assert 500 < history.calls < 700 and history.calls == 2 * history.seed.calls
    per_day = _one(
        "SELECT count(*) FILTER (WHERE start_time::date = %s), count(*) FILTER (WHERE start_time::date = %s), "
        "count(*) FROM ingest_toolcall",
        [first_day, first_day + dt.timedelta(days=1)],
    )
    assert per_day == (history.seed.calls, history.seed.calls, history.calls)
    assert _one("SELECT count(*) FROM ingest_span") == (history.spans,)
    assert _one("SELECT count(*) FROM ingest_changedbucket") == (0,)
    assert _one("SELECT to_regclass(%s)", [fleet_load.SPAN_STAGE]) == (None,)
