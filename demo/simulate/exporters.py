"""Where simulated spans go: a Toolwatch server over OTLP/HTTP, or straight into ingest.

Both take the SDK's finished spans through the official encoder:
- `http_exporter(url, key)`: the official `OTLPSpanExporter` (protobuf, gzip), pointed at
  any Toolwatch base URL with a project key;
- `IngestExporter(project)`: serialises `encode_spans(spans)` exactly as that exporter
  does, decodes it with the same `ingest.otlp.decode_request` the /v1/traces view uses
  and hands it to `ingest.services.spans_ingest`: no server needed (tests, Quickstart).
`send(sessions, exporter)` batches whole sessions into large requests.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from demo.simulate.generator import Session, SimulationError

DEFAULT_BATCH_SPANS = 5_000


def http_exporter(url: str, key: str, *, timeout: float = 30.0):
    """The official OTLP/HTTP exporter for a Toolwatch base URL ("http://host:8000")."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(
        endpoint=f"{url.rstrip('/')}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=Compression.Gzip,
        timeout=timeout,
    )


class IngestExporter(SpanExporter):
    """An in-process exporter: the official encoder's protobuf bytes, ingested directly.

    `now` is the ingest clock (retention and future-skew checks); None means the real one.
    """

    def __init__(self, project, *, now: dt.datetime | None = None, limits=None):
        self.project = project
        self.now = now
        self.limits = limits
        self.accepted = self.duplicates = self.rejected = self.tool_calls = 0

    def export(self, spans) -> SpanExportResult:
        from django.conf import settings

        from ingest import otlp
        from ingest.services import spans_ingest

        body = encode_spans(spans).SerializePartialToString()  # what OTLPSpanExporter sends
        request = otlp.decode_request(body, otlp.media_type("application/x-protobuf"))
        result = spans_ingest(
            project=self.project, request=request, limits=self.limits or settings.INGEST_LIMITS, now=self.now
        )
        self.accepted += result.accepted
        self.duplicates += result.duplicates
        self.rejected += result.rejected_count
        self.tool_calls += result.tool_calls
        if result.rejected_count:
            raise SimulationError(f"ingest refused spans: {result.rejection_message()}")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@dataclass
class SendStats:
    requests: int = 0
    spans: int = 0
    sessions: int = 0
    tool_calls: int = 0


def send(
    sessions: Iterable[Session],
    exporter: SpanExporter,
    *,
    batch_spans: int = DEFAULT_BATCH_SPANS,
    on_sent: Callable[[Session], None] | None = None,
) -> SendStats:
    """Export sessions in requests of about `batch_spans` spans, never splitting a session.

    `on_sent(session)` runs for each session once its request succeeded (count the ground
    truth there). Raises SimulationError when the exporter reports a failure.
    """
    stats = SendStats()
    batch: list = []
    pending: list[Session] = []

    def flush() -> None:
        if not batch:
            return
        if exporter.export(batch) != SpanExportResult.SUCCESS:
            raise SimulationError(
                f"the exporter failed to send {len(batch)} spans (check the URL, the key and the server's log)"
            )
        stats.requests += 1
        stats.spans += len(batch)
        for session in pending:
            stats.sessions += 1
            stats.tool_calls += session.tool_calls
            if on_sent is not None:
                on_sent(session)
        batch.clear()
        pending.clear()

    for session in sessions:
        batch.extend(session.spans)
        pending.append(session)
        if len(batch) >= batch_spans:
            flush()
    flush()
    return stats
