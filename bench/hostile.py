"""Hostile shapes up to the body limit against a real server: peak RSS of the worker and answer time.

    .venv/bin/python bench/hostile.py [--database-url postgres://postgres@127.0.0.1:5432/toolwatch_bounds]
        [--shapes name,name] [--mib 60]

A benchmark that prints figures, not a test. The bench database is dropped and recreated, migrated,
given a project and a key. Then for each shape a fresh gunicorn (config.wsgi, one sync worker,
DEBUG=0, the default limits) gets ONE POST of that shape (/v1/traces; logs_* to /v1/logs, metrics_*
to /v1/metrics), built before the server starts and just under the 64 MiB body limit (protobuf bodies
over 8 MiB are checked and flattened in pieces: ingest/wire.py); the figures are the worker's VmHWM
(/proc/<pid>/status, its peak RSS: the target is < 400 MB), the answer's status and the time to the answer (the target is
within the write deadline, ingest.limits.MAX_WRITE = 30 s). Shapes:

    pb_array_ints      one span, one array attribute of ~15 M tiny ints (the protobuf worst case)
    pb_array_mixed     the same with ints that differ one from the next (no run of identical items)
    pb_bad_tail        pb_array_ints with its last byte cut: not protobuf (400), found at the end
    pb_array_strings   one span, one array attribute of ~60 K strings of 1 KiB
    pb_deep_kvlists    spans whose attributes nest kvlists 64 deep, 4 wide
    pb_many_attributes one span with ~2 M small attributes
    pb_long_strings    one span with 60 string attributes of 1 MiB
    pb_many_spans_big  ~4,000 spans with 16 KiB of attributes each (the request budget)
    json_array_gzip    the issue's case: one JSON span of one huge array, gzip-sent
    json_at_limit      a JSON body just under max_json_values (what is still parsed)
    gzip_bomb          1 GiB of zeros gzip-compressed to ~1 MB
    pb_empty_resources ~32 M empty ResourceSpans (413: max_resources_per_request)
    logs_array_ints    POST /v1/logs: one log record whose body is an array of ~15 M tiny ints
    logs_many_attributes  one log record with ~6.7 M one-letter attributes
    logs_deep_kvlists  log records whose bodies nest kvlists 64 deep, 4 wide
    logs_empty_scopes  one ResourceLogs of ~32 M empty ScopeLogs (413: max_scopes_per_request)
    pb_repeated_name   one span with its name sent ~16 M times (413: a single field sent more often
                       than the walk keeps; upb would parse every copy)
    pb_alternating     one span of ~33 M empty attributes and events in turn (read one by one)
    logs_body_twice    one log record whose body (~7 M tiny ints) is sent twice (413: upb would merge them)
    metrics_many_points   POST /v1/metrics: one gauge of ~32 M empty data points (all dropped, counted)
    metrics_points_mixed  one gauge of ~5 M data points, no two in a row alike
    metrics_many_metrics  ~32 M empty Metrics (413: max_metrics_per_request)
    pb_nested_groups   pb_array_ints with an unknown group nested 5,000 deep in its span (400: upb's depth limit)
    pb_big_group       one span holding one unknown group of ~33 M varints (413: fields read one by one)
    pb_resource_fields one ResourceSpans of one span and ~21 M copies of its schema_url (413: wire.MAX_HEAD_BYTES)
    pb_big_resource    one ResourceSpans whose Resource holds ~6.7 M one-letter attributes (413: wire.MAX_HEAD_BYTES)
    pb_unsure_group    pb_array_ints with an unknown group holding a field numbered 0 in its span: upb skips it,
                       and so does the walk (it sent the body to the whole parse, wire._Unsure: 1 GB)

The last line is the figures as key=value: <shape>_rss_mb=… <shape>_s=… <shape>_status=…
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.ingest import Gunicorn, django_setup, migrate_and_create_key, proc_status_kb, recreate_database, server_env  # noqa: E402

MIB = 1024 * 1024
TARGET_RSS_MB = 400
DEADLINE_S = 30


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return bytes([(field << 3) | 2]) + _varint(len(payload)) + payload


def _kv(key: str, any_value: bytes) -> bytes:
    return _ld(1, key.encode()) + _ld(2, any_value)


def _span_bytes(number: int, attributes: list[bytes]) -> bytes:
    now = time.time_ns()
    head = (
        _ld(1, bytes(range(1, 17))) + _ld(2, number.to_bytes(8, "big")) + _ld(5, b"execute_tool hostile")
        + b"\x39" + (now - 10**9).to_bytes(8, "little") + b"\x41" + now.to_bytes(8, "little")
    )  # fmt: skip
    return head + b"".join(_ld(9, attribute) for attribute in attributes)


def _request(spans: list[bytes]) -> bytes:
    return _ld(1, _ld(2, b"".join(_ld(2, span) for span in spans)))


def _array(items: bytes) -> bytes:
    return _ld(5, items)  # AnyValue.array_value


def pb_array_ints(limit: int) -> tuple[bytes, str]:
    item = _ld(1, b"\x18\x01")  # ArrayValue.values: AnyValue{int_value: 1}
    count = (limit - 256) // len(item)
    return _request([_span_bytes(1, [_kv("list", _array(item * count))])]), "x-protobuf"


def pb_array_mixed(limit: int) -> tuple[bytes, str]:
    items = b"".join(_ld(1, b"\x18" + bytes([i])) for i in range(128))  # AnyValue{int_value: 0..127}
    count = (limit - 256) // len(items)
    return _request([_span_bytes(1, [_kv("list", _array(items * count))])]), "x-protobuf"


def pb_bad_tail(limit: int) -> tuple[bytes, str]:
    return pb_array_ints(limit)[0][:-1], "x-protobuf"


def pb_array_strings(limit: int) -> tuple[bytes, str]:
    item = _ld(1, _ld(1, b"s" * 1024))
    count = (limit - 256) // len(item)
    return _request([_span_bytes(1, [_kv("list", _array(item * count))])]), "x-protobuf"


def pb_deep_kvlists(limit: int) -> tuple[bytes, str]:
    value = _ld(1, b"leaf")
    for _ in range(64):
        entry = _ld(1, _kv("a", value))  # KeyValueList.values
        value = _ld(6, entry * 4)  # AnyValue.kvlist_value, 4 entries
        if len(value) > 1 * MIB:
            break
    attribute = _kv("deep", value)
    spans, size, number = [], 0, 1
    while size + len(attribute) + 64 < limit:
        spans.append(_span_bytes(number, [attribute]))
        size += len(spans[-1]) + 8
        number += 1
    return _request(spans), "x-protobuf"


def pb_many_attributes(limit: int) -> tuple[bytes, str]:
    attribute = _ld(9, _kv("k", _ld(1, b"v")))
    count = (limit - 256) // len(attribute)
    now = time.time_ns()
    head = (
        _ld(1, bytes(range(1, 17))) + _ld(2, (1).to_bytes(8, "big")) + _ld(5, b"x")
        + b"\x39" + (now - 10**9).to_bytes(8, "little") + b"\x41" + now.to_bytes(8, "little")
    )  # fmt: skip
    return _ld(1, _ld(2, _ld(2, head + attribute * count))), "x-protobuf"


def pb_long_strings(limit: int) -> tuple[bytes, str]:
    attributes = [_kv(f"blob.{i}", _ld(1, b"x" * MIB)) for i in range(limit // (MIB + 64) - 1)]
    return _request([_span_bytes(1, attributes)]), "x-protobuf"


def pb_many_spans_big(limit: int) -> tuple[bytes, str]:
    attributes = [_kv(f"blob.{i}", _ld(1, secrets.token_hex(512).encode() * 1)) for i in range(16)]
    spans, size, number = [], 0, 1
    while True:
        span = _span_bytes(number, attributes)
        if size + len(span) + 8 >= limit:
            break
        spans.append(span)
        size += len(span) + 8
        number += 1
    return _request(spans), "x-protobuf"


def _json_span(values: str) -> bytes:
    now = time.time_ns()
    return (
        '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10",'
        f'"spanId":"0102030405060708","name":"x","startTimeUnixNano":"{now - 10**9}","endTimeUnixNano":"{now}",'
        '"attributes":[{"key":"list","value":{"arrayValue":{"values":[' + values + "]}}}]}]}]}]}"
    ).encode()


def json_array_gzip(limit: int) -> tuple[bytes, str]:
    item = '{"stringValue":"a"},'
    count = (limit - 512) // len(item)
    return gzip.compress(_json_span((item * count)[:-1]), 1), "json+gzip"


def json_at_limit(limit: int) -> tuple[bytes, str]:
    from ingest.limits import DEFAULT_LIMITS

    item = '{"intValue":1},'
    count = DEFAULT_LIMITS.max_json_values // 2 - 100
    return _json_span((item * count)[:-1]), "json"


def gzip_bomb(limit: int) -> tuple[bytes, str]:
    compressor = gzip.compress(b"\0" * (64 * MIB), 9)
    return compressor * 16, "x-protobuf+gzip"  # 16 members of 64 MiB: 1 GiB inflated


def pb_empty_resources(limit: int) -> tuple[bytes, str]:
    return b"\n\x00" * (limit // 2), "x-protobuf"


def _record_bytes(fields: bytes) -> bytes:
    return b"\x09" + (time.time_ns() - 10**9).to_bytes(8, "little") + _ld(9, bytes(range(1, 17))) + fields


def _logs_request(records: list[bytes]) -> bytes:
    return _ld(1, _ld(2, b"".join(_ld(2, record) for record in records)))  # ResourceLogs, ScopeLogs, LogRecords


def logs_array_ints(limit: int) -> tuple[bytes, str]:
    item = _ld(1, b"\x18\x01")
    count = (limit - 256) // len(item)
    return _logs_request([_record_bytes(_ld(5, _array(item * count)))]), "x-protobuf"  # LogRecord.body


def logs_many_attributes(limit: int) -> tuple[bytes, str]:
    attribute = _ld(6, _kv("k", _ld(1, b"v")))  # LogRecord.attributes
    count = (limit - 256) // len(attribute)
    return _logs_request([_record_bytes(attribute * count)]), "x-protobuf"


def logs_deep_kvlists(limit: int) -> tuple[bytes, str]:
    value = _ld(1, b"leaf")
    for _ in range(64):
        value = _ld(6, _ld(1, _kv("a", value)) * 4)
        if len(value) > 1 * MIB:
            break
    records, size = [], 0
    while size + len(value) + 64 < limit:
        records.append(_record_bytes(_ld(5, value)))
        size += len(records[-1]) + 8
    return _logs_request(records), "x-protobuf"


def logs_empty_scopes(limit: int) -> tuple[bytes, str]:
    return _ld(1, b"\x12\x00" * ((limit - 16) // 2)), "x-protobuf"


def pb_repeated_name(limit: int) -> tuple[bytes, str]:
    # Span.name sent ~16 M times: upb keeps the last, but only after parsing every copy.
    name = _ld(5, b"n")
    return _request([_span_bytes(1, []) + name * ((limit - 256) // len(name))]), "x-protobuf"


def pb_alternating(limit: int) -> tuple[bytes, str]:
    # One span of ~33 M empty attributes and events in turn: no two fields in a row alike, so the
    # walk reads each one by one (identical runs are skipped 64 at a time, these are not).
    pair = _ld(9, b"") + _ld(11, b"")
    return _request([_span_bytes(1, []) + pair * ((limit - 256) // len(pair))]), "x-protobuf"


def logs_body_twice(limit: int) -> tuple[bytes, str]:
    # A body of ~7 M tiny ints sent twice in one record: upb concatenates the arrays (a whole parse).
    item = _ld(1, b"\x18\x01")
    body = _ld(5, _array(item * ((limit - 256) // 2 // (len(item) + 1))))
    return _logs_request([_record_bytes(body + body)]), "x-protobuf"


def _gauge_request(points: bytes) -> bytes:
    return _ld(1, _ld(2, _ld(2, _ld(1, b"g") + _ld(5, points))))  # ResourceMetrics, ScopeMetrics, Metric.gauge


def metrics_many_points(limit: int) -> tuple[bytes, str]:
    return _gauge_request(b"\n\x00" * ((limit - 64) // 2)), "x-protobuf"


def metrics_points_mixed(limit: int) -> tuple[bytes, str]:
    points = b"".join(_ld(1, b"\x31" + i.to_bytes(8, "little")) for i in range(4096))  # NumberDataPoint.as_int
    return _gauge_request(points * ((limit - 64) // len(points))), "x-protobuf"


def metrics_many_metrics(limit: int) -> tuple[bytes, str]:
    return _ld(1, _ld(2, b"\x12\x00" * ((limit - 16) // 2))), "x-protobuf"


def pb_nested_groups(limit: int) -> tuple[bytes, str]:
    # Field 111 as a start group 5,000 times, then as many ends: the walk read groups recursively.
    groups = b"\xfb\x06" * 5000 + b"\xfc\x06" * 5000
    item = _ld(1, b"\x18\x01")
    count = (limit - 256 - len(groups)) // len(item)
    return _request([_span_bytes(1, [_kv("list", _array(item * count))]) + groups]), "x-protobuf"


def pb_big_group(limit: int) -> tuple[bytes, str]:
    # One unknown group (field 111) of ~33 M varint fields: upb skips it, the walk read each tag.
    return _request([_span_bytes(1, []) + b"\xfb\x06" + b"\x08\x01" * ((limit - 256) // 2) + b"\xfc\x06"]), "x-protobuf"


def pb_resource_fields(limit: int) -> tuple[bytes, str]:
    # ResourceSpans.schema_url sent ~21 M times after one span: each copy was read and kept apart.
    return _ld(1, _ld(2, _ld(2, _span_bytes(1, []))) + b"\x1a\x01x" * ((limit - 256) // 3)), "x-protobuf"


def pb_big_resource(limit: int) -> tuple[bytes, str]:
    # A Resource of ~6.7 M attributes (then one span): a walked ResourceSpans' resource was parsed whole.
    attribute = _ld(1, _kv("k", _ld(1, b"v")))  # Resource.attributes
    resource = _ld(1, attribute * ((limit - 256) // len(attribute)))
    return _ld(1, resource + _ld(2, _ld(2, _span_bytes(1, [])))), "x-protobuf"


def pb_unsure_group(limit: int) -> tuple[bytes, str]:
    # A group of field 111 holding a varint numbered 0: upb accepts it; the walk said _Corrupt.
    group = b"\xfb\x06\x00\x01\xfc\x06"
    item = _ld(1, b"\x18\x01")
    count = (limit - 256 - len(group)) // len(item)
    return _request([_span_bytes(1, [_kv("list", _array(item * count))]) + group]), "x-protobuf"


SHAPES = {
    f.__name__: f
    for f in (
        pb_array_ints, pb_array_mixed, pb_bad_tail, pb_array_strings, pb_deep_kvlists, pb_many_attributes, pb_long_strings, pb_many_spans_big,
        json_array_gzip, json_at_limit, gzip_bomb, pb_empty_resources, logs_array_ints, logs_many_attributes, logs_deep_kvlists,
        logs_empty_scopes, pb_repeated_name, pb_alternating, logs_body_twice, metrics_many_points, metrics_points_mixed, metrics_many_metrics,
        pb_nested_groups, pb_big_group, pb_resource_fields, pb_big_resource, pb_unsure_group,
    )
}  # fmt: skip


def _path(name: str) -> str:
    return "/v1/logs" if name.startswith("logs_") else "/v1/metrics" if name.startswith("metrics_") else "/v1/traces"


def run_shape(name: str, body: bytes, kind: str, url: str, key: str, log_dir: str) -> dict:
    media, _, coding = kind.partition("+")
    headers = {"Content-Type": f"application/{media}", "Authorization": f"Bearer {key}"}
    if coding:
        headers["Content-Encoding"] = coding
    with Gunicorn(workers=1, threads=1, timeout=120, env=server_env(url), log_dir=log_dir, label=name) as server:
        (pid,) = server.worker_pids()
        baseline = proc_status_kb(pid, "VmHWM") / 1024
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        start = time.perf_counter()
        try:
            conn.request("POST", _path(name), body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            status = response.status
            detail = ""
            if status != 200 or data not in (b"", b"{}"):
                text = data[:200].decode("utf-8", "replace")  # a protobuf partial success: its message only
                detail = "".join(c if c.isprintable() and c != "\ufffd" else " " for c in text).strip()
        except (OSError, http.client.HTTPException) as exc:
            status, detail = "error", repr(exc)
        seconds = time.perf_counter() - start
        conn.close()
        survived = pid in server.worker_pids()
        peak = proc_status_kb(pid, "VmHWM") / 1024 if survived else float("nan")
    return {"status": status, "s": seconds, "rss_mb": peak, "baseline_mb": baseline, "detail": detail, "wire": len(body)}


def cut_counts(url: str) -> dict:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT reason, sum(count) FROM ingest_ingeststat WHERE outcome = 'cut' GROUP BY reason")
        return {reason: int(total) for reason, total in rows.fetchall()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/toolwatch_bounds")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--mib", type=float, default=63.5, help="body size of each shape (the limit is 64)")
    args = parser.parse_args()
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))  # the servers inherit it
    recreate_database(args.database_url)
    django_setup(args.database_url)
    _, key = migrate_and_create_key()
    limit = int(args.mib * MIB)
    print(f"load average before: {os.getloadavg()}", flush=True)
    figures, failures = [], []
    with tempfile.TemporaryDirectory(prefix="toolwatch-hostile-") as log_dir:
        for name in args.shapes.split(","):
            body, kind = SHAPES[name](limit)
            result = run_shape(name, body, kind, args.database_url, key, log_dir)
            del body
            ok = result["rss_mb"] < TARGET_RSS_MB and result["s"] < DEADLINE_S and result["status"] not in ("error", 500)
            print(
                f"{name:20s} wire {result['wire'] / MIB:6.1f} MiB  status {result['status']}  "
                f"answer {result['s']:6.2f} s  peak RSS {result['rss_mb']:6.0f} MB (idle {result['baseline_mb']:.0f})"
                f"  {'ok' if ok else 'OVER TARGET'}  {result['detail'][:120]}",
                flush=True,
            )
            if not ok:
                failures.append(name)
            figures += [f"{name}_rss_mb={result['rss_mb']:.0f}", f"{name}_s={result['s']:.2f}", f"{name}_status={result['status']}"]
    print(f"load average after: {os.getloadavg()}")
    print("cut counters:", json.dumps(cut_counts(args.database_url)))
    print(" ".join(figures))
    if failures:
        print(f"OVER TARGET (< {TARGET_RSS_MB} MB, < {DEADLINE_S} s): {', '.join(failures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
