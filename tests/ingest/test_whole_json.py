"""ingest.models.WholeJSONField on PostgreSQL: the JSON's text in a `text` column, read back whole.

What is only ever read whole is not checked or converted on the way in (docs/benchmarks.md,
"Session 10"); what comes back is what went in, and the stored text is always JSON.
"""

from __future__ import annotations

import datetime as dt
import importlib

import pytest
from django.conf import settings
from django.db import connection

from ingest import otlp
from ingest.models import Span, ToolCall
from ingest.services import spans_ingest
from tests.factories import make_project
from tests.otlp_builders import json_bytes, json_request, json_span

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_partitions")]

NOW = dt.datetime(2026, 11, 29, 12, tzinfo=dt.UTC)
START_NS = int(NOW.timestamp()) * 10**9 - 60 * 10**9
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
COLUMNS = {("ingest_span", "attributes"), ("ingest_span", "events"), ("ingest_span", "links"),
           ("ingest_toolcall", "arguments"), ("ingest_toolcall", "result")}  # fmt: skip
MIGRATION = importlib.import_module("ingest.migrations.0014_whole_json_as_text")
LZ4 = importlib.import_module("ingest.migrations.0015_lz4_whole_json")


def _json_columns() -> list[tuple[str, str, str, str]]:
    """(table, column, type, compression) of the WholeJSONField columns, on the parents and every partition."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attcompression "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE a.attname IN ('attributes', 'events', 'links', 'arguments', 'result') AND NOT a.attisdropped "
            "AND (c.relname LIKE 'ingest\\_span%%' OR c.relname LIKE 'ingest\\_toolcall%%') AND c.relkind IN ('r', 'p')"
        )
        return cursor.fetchall()


def column_types() -> set[tuple[str, str, str]]:
    return {(table, column, kind) for table, column, kind, _ in _json_columns()}


def compression() -> set[tuple[str, str, str]]:
    return {(table, column, method) for table, column, _, method in _json_columns()}


def ingest_tool_span(arguments: str) -> None:
    span = json_span(
        TRACE, "00f067aa0ba902b7", "execute_tool lookup", start_ns=START_NS,
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
               "gen_ai.tool.call.arguments": arguments, "gen_ai.tool.call.result": '{"rows": [1, 2]}',
               "note": "é\u2028\n\"quoted\"", "count": 3, "ratio": 0.25, "flag": True},
        events=[{"timeUnixNano": str(START_NS + 1000), "name": "retry", "attributes": [{"key": "n", "value": {"intValue": "1"}}]}],
    )  # fmt: skip
    request = otlp.decode_request(json_bytes(json_request([({"service.name": "svc"}, [span])])), otlp.JSON)
    result = spans_ingest(project=make_project(), request=request, limits=settings.INGEST_LIMITS, now=NOW)
    assert result.accepted == 1 and result.tool_calls == 1


def test_the_columns_only_read_whole_are_text_on_the_parents_and_their_partitions():
    ingest_tool_span('{"q": "x"}')

    types = column_types()
    assert {(table, column) for table, column, _ in types if "_p" not in table} == COLUMNS
    assert any("_p2026" in table for table, _, _ in types)  # the day's partitions are there too
    assert {kind for _, _, kind in types} == {"text"}


def test_what_ingest_copies_reads_back_as_it_was_sent_and_is_json_to_postgresql():
    ingest_tool_span('{"q": "x", "n": 12345678901234567890123}')

    span = Span.objects.get()
    assert span.attributes["note"] == "é\u2028\n\"quoted\""
    assert (span.attributes["count"], span.attributes["ratio"], span.attributes["flag"]) == (3, 0.25, True)
    assert span.events == [{"name": "retry", "time_ns": START_NS + 1000, "attributes": {"n": 1}}]
    assert span.links == []
    call = ToolCall.objects.get()
    assert call.arguments == {"q": "x", "n": 12345678901234567890123}  # beyond 64 bits: json, not orjson
    assert call.result == {"rows": [1, 2]}
    with connection.cursor() as cursor:  # every stored text parses as JSON in SQL
        cursor.execute("SELECT attributes::jsonb ->> 'note', jsonb_array_length(events::jsonb) FROM ingest_span")
        assert cursor.fetchall() == [("é\u2028\n\"quoted\"", 1)]
        cursor.execute("SELECT arguments::jsonb ->> 'q', jsonb_array_length(result::jsonb -> 'rows') FROM ingest_toolcall")
        assert cursor.fetchall() == [("x", 2)]


def test_what_the_orm_writes_stays_json_nan_and_infinities_as_null():
    ingest_tool_span('{"q": "x"}')
    call = ToolCall.objects.get()

    call.arguments = {"nan": float("nan"), "inf": float("-inf"), "big": 2**70, "keys": {1: "one"}, "s": "\u00e9"}
    call.result = None
    call.save(update_fields=["arguments", "result"])

    call.refresh_from_db()
    assert call.arguments == {"nan": None, "inf": None, "big": 2**70, "keys": {"1": "one"}, "s": "\u00e9"}
    assert call.result is None  # SQL NULL, as before
    with connection.cursor() as cursor:
        cursor.execute("SELECT arguments::jsonb ->> 'big', result IS NULL FROM ingest_toolcall")
        assert cursor.fetchall() == [(str(2**70), True)]


def test_the_migration_turns_json_columns_into_text_keeping_their_values_and_back():
    ingest_tool_span('{"q": "x"}')
    with connection.schema_editor() as editor:
        MIGRATION.to_json(None, editor)
    assert {kind for _, _, kind in column_types()} == {"json"}
    assert ToolCall.objects.get().arguments == {"q": "x"}  # read back through psycopg's json loader

    with connection.schema_editor() as editor:
        MIGRATION.to_text(None, editor)
        MIGRATION.to_text(None, editor)  # text to text: nothing changes
        LZ4.to_lz4(None, editor)  # a type change resets a column's compression; 0015 follows 0014
    assert {kind for _, _, kind in column_types()} == {"text"}
    assert ToolCall.objects.get().arguments == {"q": "x"}
    assert Span.objects.get().attributes["gen_ai.tool.name"] == "lookup"



def test_large_json_is_compressed_with_lz4_in_new_and_existing_partitions():
    big = '{"q": "' + "lorem ipsum dolor sit amet " * 400 + '"}'  # ~11 kB: past TOAST's 2 kB threshold
    ingest_tool_span(big)  # creates today's partitions, which take the parent's setting
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_column_compression(attributes) FROM ingest_span")
        assert cursor.fetchall() == [("lz4",)]
        cursor.execute("SELECT pg_column_compression(arguments) FROM ingest_toolcall")
        assert cursor.fetchall() == [("lz4",)]
    assert {kind for _, _, kind in compression()} == {"l"}

    with connection.schema_editor() as editor:  # back, then forward: existing partitions follow too
        LZ4.to_pglz(None, editor)
    assert {kind for _, _, kind in compression()} == {"p"}
    with connection.schema_editor() as editor:
        LZ4.to_lz4(None, editor)
    assert {kind for _, _, kind in compression()} == {"l"}
    assert ToolCall.objects.get().arguments == {"q": "lorem ipsum dolor sit amet " * 400}
