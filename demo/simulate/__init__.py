"""Demo and benchmark traffic: realistic agent traces through the official OpenTelemetry SDK.

    sim = Simulator(seed=7, rate=150, drifts=(DriftSpec.parse("search_kb:retry_rise_flat_error:36", now=now),))
    backfill(sim, IngestExporter(project), start=now - dt.timedelta(days=30), end=now)   # in process
    backfill(sim, http_exporter("http://127.0.0.1:8000", key), start=..., end=now)        # over OTLP/HTTP
    live(sim, http_exporter(url, key), interval=5)                                          # until stopped
    sim.truth.total(tool="search_kb")     # ground truth, counted the docs/contract/metrics.md way
    encoded_requests(100_000)             # protobuf request bodies for bench/*.py

Modules: `profiles` (the fleet: deployments, agents, tools and their failure profiles),
`evidence` (how each kind of failure is written on a span, per convention), `generator`
(sessions as traces, seeded per deployment and hour; drift), `truth` (ground truth),
`exporters` (OTLP/HTTP or in-process ingest), `modes` (backfill, live, benchmark load).
docs/demo-traffic.md describes the fleet and the drift kinds.
"""

from demo.simulate.exporters import IngestExporter, SendStats, http_exporter, send
from demo.simulate.generator import DRIFT_KINDS, DriftSpec, Session, SimulationError, Simulator
from demo.simulate.modes import backfill, encoded_requests, live
from demo.simulate.truth import Counts, GroundTruth

__all__ = [
    "DRIFT_KINDS",
    "Counts",
    "DriftSpec",
    "GroundTruth",
    "IngestExporter",
    "SendStats",
    "Session",
    "SimulationError",
    "Simulator",
    "backfill",
    "encoded_requests",
    "http_exporter",
    "live",
    "send",
]
