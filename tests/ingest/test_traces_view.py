"""POST /v1/traces through Django's test client: the OTLP contract at the edge."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.models import ApiKey, IngestStat, Span, ToolCall
from ingest.services import api_key_revoke
from tests.factories import make_key
from tests.otlp_builders import agent_with_tools, json_bytes, json_request, json_span, protobuf_request, sdk_spans

PB = "application/x-protobuf"
JSON = "application/json"
TRACE = "5b8efff798038103d269b633813fc60c"


def post(client, body: bytes, key: str | None, content_type: str = PB, **headers):
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return client.generic("POST", "/v1/traces", body, content_type=content_type, **headers)


def status_message(response) -> str:
    if response["Content-Type"].startswith(JSON):
        return json.loads(response.content)["message"]
    status = status_pb2.Status()
    status.ParseFromString(response.content)
    return status.message


def stored() -> tuple[int, int]:
    return Span.objects.count(), ToolCall.objects.count()


@pytest.fixture
def key(db):
    return make_key()[1]


@pytest.fixture
def project_key(db):
    return make_key()


def failing_tools_request() -> bytes:
    def build(tracer):
        agent_with_tools(
            tracer,
            tools=[
                {"name": "lookup_order"},
                {"name": "charge_card", "error": TimeoutError("upstream timed out after 30s")},
                {"name": "fetch_invoice", "attributes": {"http.response.status_code": 404}, "error": RuntimeError("HTTP 404")},
            ],
        )

    return protobuf_request(sdk_spans(build))


def test_protobuf_from_the_sdk_encoder_is_stored_with_tool_calls(client, key):
    response = post(client, gzip.compress(failing_tools_request()), key, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 200
    assert response["Content-Type"] == PB
    assert response.content == b""  # an empty ExportTraceServiceResponse
    assert Span.objects.count() == 5
    calls = {call.tool: call for call in ToolCall.objects.all()}
    assert set(calls) == {"lookup_order", "charge_card", "fetch_invoice"}
    assert calls["lookup_order"].ok
    assert calls["charge_card"].error_class == "transient"
    assert calls["fetch_invoice"].error_class == "not_found"
    assert calls["fetch_invoice"].classified_by
    assert {call.agent for call in calls.values()} == {"support"}
    assert {call.service for call in calls.values()} == {"support-agent"}


def test_deflate_bodies_are_accepted(client, key):
    response = post(client, zlib.compress(failing_tools_request()), key, HTTP_CONTENT_ENCODING="deflate")

    assert response.status_code == 200
    assert Span.objects.count() == 5


def test_a_resent_batch_stores_nothing_new_and_counts_duplicates(client, project_key):
    project, key = project_key
    body = failing_tools_request()
    assert post(client, body, key).status_code == 200
    before = stored()

    response = post(client, body, key)

    assert response.status_code == 200
    assert stored() == before
    counts = {row.outcome: row.count for row in IngestStat.objects.filter(project=project)}
    assert counts == {"accepted": 5, "duplicate": 5}


def test_json_shaped_like_the_js_exporter_is_accepted(client, key):
    document = json_request(
        [
            (
                {"service.name": "billing-agent", "deployment.environment": "staging"},
                [
                    json_span(TRACE, "eee19b7ec3c1b174", "invoke_agent billing", attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}),
                    json_span(
                        TRACE,
                        "eee19b7ec3c1b175",
                        "execute_tool refund",
                        parent="eee19b7ec3c1b174",
                        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "refund", "http.response.status_code": 429},
                        status_code=2,
                        status_message="rate limited",
                    ),
                ],
            )
        ]
    )

    response = post(client, json_bytes(document), key, content_type=JSON)

    assert response.status_code == 200
    assert response["Content-Type"] == JSON
    assert json.loads(response.content) == {}
    call = ToolCall.objects.get()
    assert (call.tool, call.error_class, call.agent, call.service, call.environment) == (
        "refund", "transient", "billing", "billing-agent", "staging",
    )  # fmt: skip


def test_each_resource_keeps_its_own_attributes(client, key):
    document = json_request(
        [
            ({"service.name": "alpha"}, [json_span(TRACE, "0000000000000001", "execute_tool a", attrs={"gen_ai.tool.name": "a", "gen_ai.operation.name": "execute_tool"})]),
            ({"service.name": "beta", "deployment.environment.name": "prod"}, [json_span(TRACE, "0000000000000002", "execute_tool b", attrs={"gen_ai.tool.name": "b", "gen_ai.operation.name": "execute_tool"})]),
        ]
    )

    assert post(client, json_bytes(document), key, content_type=JSON).status_code == 200

    services = dict(Span.objects.values_list("span_id", "service"))
    assert services == {"0000000000000001": "alpha", "0000000000000002": "beta"}
    alpha, beta = Span.objects.select_related("resource").order_by("span_id")
    assert alpha.resource.attributes == {"service.name": "alpha"}
    assert beta.resource.attributes == {"service.name": "beta", "deployment.environment.name": "prod"}
    assert beta.environment == "prod"


def test_an_agent_span_arriving_later_settles_its_tool_calls_agent(client, key):
    agent = json_span(TRACE, "00000000000000aa", "invoke_agent triage", attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"})
    step = json_span(TRACE, "00000000000000ab", "chat gpt-4o", parent="00000000000000aa", attrs={"gen_ai.operation.name": "chat"})
    tool = json_span(TRACE, "00000000000000ac", "execute_tool search", parent="00000000000000ab", attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"})

    post(client, json_bytes(json_request([({"service.name": "s"}, [tool])])), key, content_type=JSON)
    assert ToolCall.objects.get().agent == ""
    post(client, json_bytes(json_request([({"service.name": "s"}, [step])])), key, content_type=JSON)
    post(client, json_bytes(json_request([({"service.name": "s"}, [agent])])), key, content_type=JSON)

    assert ToolCall.objects.get().agent == "triage"


def test_secrets_are_redacted_before_storage(client, key):
    span = json_span(
        TRACE,
        "0000000000000003",
        "execute_tool send_email",
        attrs={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "send_email",
            "http.request.header.authorization": "Bearer abc.def.ghi",
            "api_key": "sk-live-0123456789abcdef0123",
            "gen_ai.tool.call.arguments": json.dumps({"to": "a@example.com", "password": "hunter2"}),
        },
        status_code=2,
        status_message="auth failed for sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX",
    )

    assert post(client, json_bytes(json_request([({"service.name": "s"}, [span])])), key, content_type=JSON).status_code == 200

    stored_span = Span.objects.get()
    text = json.dumps(stored_span.attributes) + stored_span.status_message + json.dumps(ToolCall.objects.get().arguments)
    for secret in ("abc.def.ghi", "sk-live-0123456789abcdef0123", "hunter2", "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX"):
        assert secret not in text


def test_refused_spans_are_reported_as_partial_success(client, key):
    good = json_span(TRACE, "0000000000000004", "chat gpt-4o")
    backwards = json_span(TRACE, "0000000000000005", "chat gpt-4o", duration_ns=-5_000_000)

    response = post(client, json_bytes(json_request([({"service.name": "s"}, [good, backwards])])), key, content_type=JSON)

    assert response.status_code == 200
    partial = json.loads(response.content)["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    # the reason, and which span it was with its particulars, so a sender can find it
    assert partial["errorMessage"].startswith("1 span(s) rejected: end before start (first: span 0000000000000005: ")
    assert "is before start_time_unix_nano" in partial["errorMessage"]
    assert Span.objects.count() == 1


def test_partial_success_is_protobuf_for_protobuf_requests(client, key):
    def build(tracer):
        with tracer.start_as_current_span("chat gpt-4o"):
            pass

    spans = sdk_spans(build)
    request = encode_spans(spans)
    old = request.resource_spans[0].scope_spans[0].spans.add()
    old.CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    old.span_id = b"\x00\x00\x00\x00\x00\x00\x00\x09"
    old.start_time_unix_nano = 1_000_000_000  # 1970: older than any retention
    old.end_time_unix_nano = 2_000_000_000

    response = post(client, request.SerializeToString(), key)

    assert response.status_code == 200
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert answer.partial_success.rejected_spans == 1
    assert "retention" in answer.partial_success.error_message


BAD_INPUTS = [
    pytest.param(b"\xff\xfe garbage", PB, {}, 400, "protobuf", id="garbage-protobuf"),
    pytest.param(b"[1, 2, 3]", JSON, {}, 400, "object", id="json-list-at-top"),
    pytest.param(b'{"resourceSpans": "nope"}', JSON, {}, 400, "resourceSpans", id="json-wrong-shape"),
    pytest.param(b"{not json", JSON, {}, 400, "JSON", id="json-syntax"),
    pytest.param(b"hello", "text/plain", {}, 415, "text/plain", id="other-media-type"),
    pytest.param(b"\x1f\x8b\x08\x00garbage", PB, {"HTTP_CONTENT_ENCODING": "gzip"}, 400, "gzip", id="corrupt-gzip"),
    pytest.param(b"abc", PB, {"HTTP_CONTENT_ENCODING": "br"}, 415, "br", id="unknown-encoding"),
]


@pytest.mark.parametrize("body, content_type, headers, status, words", BAD_INPUTS)
def test_bad_input_gets_its_status_a_named_problem_and_no_change(client, project_key, body, content_type, headers, status, words):
    project, key = project_key

    response = post(client, body, key, content_type=content_type, **headers)

    assert response.status_code == status
    assert words.lower() in status_message(response).lower()
    assert stored() == (0, 0)
    assert IngestStat.objects.filter(project=project, outcome="refused").exists()


def test_json_ids_of_the_wrong_length_are_refused(client, key):
    span = json_span("abcd", "0000000000000006", "chat")

    response = post(client, json_bytes(json_request([({"service.name": "s"}, [span])])), key, content_type=JSON)

    assert response.status_code in (200, 400)
    assert "trace" in (status_message(response) if response.status_code == 400 else json.loads(response.content)["partialSuccess"]["errorMessage"]).lower()
    assert stored() == (0, 0)


def test_a_gzip_bomb_is_refused_with_413(client, key):
    bomb = gzip.compress(b"\0" * (80 * 1024 * 1024), compresslevel=9)

    response = post(client, bomb, key, HTTP_CONTENT_ENCODING="gzip")

    assert response.status_code == 413
    assert "decompress" in status_message(response).lower()
    assert stored() == (0, 0)


def test_an_oversize_body_is_refused_with_413(client, key, settings):
    from ingest.limits import IngestLimits

    settings.INGEST_LIMITS = IngestLimits(max_body_bytes=4096)

    response = post(client, b"\0" * 5000, key)

    assert response.status_code == 413
    assert "4096" in status_message(response)
    assert stored() == (0, 0)


def test_too_many_spans_in_one_request_is_refused_with_413(client, key, settings):
    from ingest.limits import IngestLimits

    settings.INGEST_LIMITS = IngestLimits(max_spans_per_request=2)

    response = post(client, failing_tools_request(), key)

    assert response.status_code == 413
    assert "spans" in status_message(response)
    assert stored() == (0, 0)


def test_a_missing_key_is_401(client, db):
    response = post(client, failing_tools_request(), None)

    assert response.status_code == 401
    assert "Authorization" in status_message(response)
    assert stored() == (0, 0)


def test_an_unknown_key_is_401(client, key):
    response = post(client, failing_tools_request(), "tw_not-a-real-key")

    assert response.status_code == 401
    assert "not recognised" in status_message(response)


def test_a_revoked_key_is_403(client, project_key):
    project, key = project_key
    api_key_revoke(key=ApiKey.objects.get(project=project))

    response = post(client, failing_tools_request(), key)

    assert response.status_code == 403
    assert "revoked" in status_message(response)
    assert stored() == (0, 0)


def test_a_key_of_another_project_cannot_write_into_this_one(client, db):
    target, _ = make_key()
    _, foreign = make_key()

    response = post(client, failing_tools_request(), foreign, HTTP_X_TOOLWATCH_PROJECT=target.slug)

    assert response.status_code == 403
    assert "another project" in status_message(response)
    assert stored() == (0, 0)


def test_a_key_writes_only_into_its_own_project(client, db):
    project_a, key_a = make_key()
    project_b, _ = make_key()

    post(client, failing_tools_request(), key_a)

    assert Span.objects.filter(project=project_a).count() == 5
    assert Span.objects.filter(project=project_b).count() == 0


def test_other_methods_are_405(client, key):
    response = client.get("/v1/traces")

    assert response.status_code == 405
    assert response["Allow"] == "POST"


def test_an_empty_request_succeeds(client, key):
    # The test client drops Content-Type for an empty body; a real exporter sends it.
    assert post(client, b"", key, CONTENT_TYPE=PB).status_code == 200
    assert post(client, b"{}", key, content_type=JSON).status_code == 200


def test_the_key_records_when_it_was_last_used(client, project_key):
    project, key = project_key

    post(client, failing_tools_request(), key)

    assert ApiKey.objects.get(project=project).last_used_at is not None


def test_overlong_names_are_cut_to_fit_instead_of_failing_the_write(client, key):
    long = "x" * 5000
    agent = json_span(TRACE, "00000000000000f1", "invoke_agent", attrs={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": long})
    tool = json_span(
        TRACE, "00000000000000f2", "execute_tool", parent="00000000000000f1",
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": long, "gen_ai.tool.call.id": long, "error.type": long},
        status_code=2,
    )  # fmt: skip
    document = json_request([({"service.name": long, "deployment.environment.name": long}, [tool])])

    assert post(client, json_bytes(document), key, content_type=JSON).status_code == 200
    assert post(client, json_bytes(json_request([({"service.name": "s"}, [agent])])), key, content_type=JSON).status_code == 200

    call = ToolCall.objects.get()
    assert len(call.tool) == 256 and len(call.agent) == 256 and len(call.service) == 256


def test_a_batch_mixing_stored_and_new_spans_stores_only_the_new_ones(client, project_key):
    project, key = project_key
    first = [json_span(TRACE, f"{i:016x}", "chat") for i in range(1, 4)]
    second = first[1:] + [json_span(TRACE, f"{i:016x}", "chat") for i in range(4, 6)]
    post(client, json_bytes(json_request([({"service.name": "s"}, first)])), key, content_type=JSON)

    response = post(client, json_bytes(json_request([({"service.name": "s"}, second + second[:1])])), key, content_type=JSON)

    assert response.status_code == 200
    assert sorted(Span.objects.values_list("span_id", flat=True)) == [f"{i:016x}" for i in range(1, 6)]
    counts = {row.outcome: row.count for row in IngestStat.objects.filter(project=project)}
    assert counts == {"accepted": 5, "duplicate": 3}


def test_integers_beyond_64_bits_in_json_arguments_are_kept(client, key):
    span = json_span(
        TRACE, "0000000000000007", "execute_tool big",
        attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "big", "gen_ai.tool.call.arguments": '{"n": 123456789012345678901234567890}'},
    )  # fmt: skip

    assert post(client, json_bytes(json_request([({"service.name": "s"}, [span])])), key, content_type=JSON).status_code == 200
    assert ToolCall.objects.get().arguments == {"n": 123456789012345678901234567890}
