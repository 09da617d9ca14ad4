"""ingest.storage: what the binary COPY writes. Pure, no database."""

from __future__ import annotations

import pytest

from ingest.storage import SPAN_COLUMNS, SPAN_TYPES, JsonbBinaryDumper, JsonBinaryDumper, dumps_json


@pytest.mark.parametrize(
    "value",
    [[], {}, {"a": [1, 2.5, None, True]}, [{"k": "é\u2028\n"}], "text", 3, 2**70, {"big": -(2**65)}],
)
def test_jsonb_values_are_the_version_byte_and_their_json(value):
    assert JsonbBinaryDumper(object).dump(value) == b"\x01" + dumps_json(value)


@pytest.mark.parametrize("value", [[], {}, {"a": [1, 2.5, None, True]}, [{"k": "é\u2028\n"}], {"big": -(2**65)}])
def test_json_values_are_their_json_alone(value):
    assert JsonBinaryDumper(object).dump(value) == dumps_json(value)


def test_a_spans_attributes_events_and_links_are_copied_as_json_and_nothing_else_of_it_is():
    json_columns = {column for column, kind in zip(SPAN_COLUMNS, SPAN_TYPES, strict=True) if kind == "json"}

    assert json_columns == {"attributes", "events", "links"}
    assert "jsonb" not in SPAN_TYPES
