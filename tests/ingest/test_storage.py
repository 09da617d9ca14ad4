"""ingest.storage: what the binary COPY writes. Pure, no database."""

from __future__ import annotations

import pytest

from ingest.storage import JsonbBinaryDumper, dumps_json


@pytest.mark.parametrize(
    "value",
    [[], {}, {"a": [1, 2.5, None, True]}, [{"k": "é\u2028\n"}], "text", 3, 2**70, {"big": -(2**65)}],
)
def test_jsonb_values_are_the_version_byte_and_their_json(value):
    assert JsonbBinaryDumper(object).dump(value) == b"\x01" + dumps_json(value)
