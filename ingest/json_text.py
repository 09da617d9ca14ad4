"""The JSON text Toolwatch stores: one encoder for ingest's COPY (ingest.storage) and the ORM
(ingest.models.WholeJSONField), so every stored text is the same JSON whichever path wrote it."""

from __future__ import annotations

import json

import orjson


def dumps_json(value) -> bytes:
    """orjson (several times faster than json on the ingest hot path), falling back to json for
    what orjson refuses (integers beyond 64 bits, keys that are not strings). NaN and infinities
    become null on both paths, as orjson writes them, so the text is always JSON."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(_nan_as_null(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _nan_as_null(value):
    if type(value) is float:
        return value if value - value == 0.0 else None  # x - x is NaN only for NaN and ±inf
    if isinstance(value, dict):
        return {k: _nan_as_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_as_null(v) for v in value]
    return value
