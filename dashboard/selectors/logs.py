"""Reads of log records (POST /v1/logs): one trace's, for the trace page and its API."""

from __future__ import annotations

from django.db.models import Q

from ingest.models import LogRecord, Project

# A trace shows at most this many of its records (the earliest); the page says so.
MAX_LOG_RECORDS = 1000

# OTel log data model: SeverityNumber ranges and their short names.
SEVERITY_NAMES = ((1, "TRACE"), (5, "DEBUG"), (9, "INFO"), (13, "WARN"), (17, "ERROR"), (21, "FATAL"))


def severity_name(number: int, text: str = "") -> str:
    """The record's severity as shown: its own text, else the short name of its number, else ""."""
    if text:
        return text
    name = ""
    for start, label in SEVERITY_NAMES:
        if number >= start:
            name = label
    return name if 1 <= number <= 24 else ""


def trace_logs(project: Project, trace_id: str) -> list[LogRecord]:
    """The log records of a trace (and, for an agent session's derived trace, the session's
    records: ingest.log_events.session_trace_id), oldest first (time, then id): at most MAX_LOG_RECORDS + 1,
    so a caller can tell there are more. [] for an id that is not a trace id, and (without a
    query) for a project that never received a log record."""
    if project.logs_since is None:  # never received a log record: nothing to read
        return []
    trace_id = (trace_id or "").strip().lower()
    if len(trace_id) != 32 or any(c not in "0123456789abcdef" for c in trace_id):
        return []
    return list(
        LogRecord.objects.filter(Q(trace_id=trace_id) | Q(session_trace_id=trace_id), project=project)
        .defer("digest")
        .order_by("time", "id")[: MAX_LOG_RECORDS + 1]
    )
