"""The agent access log: who asked what, when, through the MCP server or the tool-health feed.

`record_access` is the one write (the MCP server calls it per tool call, the feed per
request); `access_for_project` is the one read (the owners' page and the API). A row's
arguments are redacted with ingest's rules (credential-looking keys and values) and
bounded before they are stored, so the log never keeps a secret an agent passed along.

Bounded two ways, on the write path (no job to schedule): every PRUNE_EVERY-th row
deletes the project's rows older than KEEP_DAYS and those beyond its newest
MAX_ROWS_PER_PROJECT. Calls are also bounded by the `agent` throttle rate.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.models import AgentAccess, ApiToken
from ingest.models import Project
from ingest.redact import redact_attributes

KEEP_DAYS = 30
MAX_ROWS_PER_PROJECT = 10_000
PRUNE_EVERY = 100
MAX_ARGUMENTS = 20  # keys kept of a call's arguments; the rest are counted under "…"
SURFACES = tuple(AgentAccess.Surface.values)


@dataclass(frozen=True)
class _ArgumentLimits:
    # The three fields redact_attributes reads of an IngestLimits, much smaller: a log line, not a span.
    max_attribute_key_chars: int = 64
    max_attribute_value_chars: int = 200
    max_value_depth: int = 2


ARGUMENT_LIMITS = _ArgumentLimits()


MAX_SUMMARY_BYTES = 4096  # a row's arguments, serialised: whatever their shape, a log line


def _bounded(value, depth: int = 0):
    """At most MAX_ARGUMENTS items of every list and keys of every mapping, at every depth
    (deeper than the redaction reads is dropped): a request's size never becomes a row's."""
    if isinstance(value, dict):
        if depth >= ARGUMENT_LIMITS.max_value_depth:
            return f"{{{len(value)} keys}}"
        items = list(value.items())
        kept = {str(key): _bounded(item, depth + 1) for key, item in items[:MAX_ARGUMENTS]}
        if len(items) > MAX_ARGUMENTS:
            kept["…"] = f"{len(items) - MAX_ARGUMENTS} more"
        return kept
    if isinstance(value, (list, tuple)):
        if depth >= ARGUMENT_LIMITS.max_value_depth:
            return f"[{len(value)} items]"
        kept = [_bounded(item, depth + 1) for item in value[:MAX_ARGUMENTS]]
        if len(value) > MAX_ARGUMENTS:
            kept.append(f"… {len(value) - MAX_ARGUMENTS} more")
        return kept
    return value


def arguments_summary(arguments: dict | None) -> dict:
    """The arguments as the log keeps them: redacted, strings cut, at most MAX_ARGUMENTS items
    per list and keys per mapping, and at most MAX_SUMMARY_BYTES in all."""
    if not arguments:
        return {}
    summary = redact_attributes(_bounded(dict(arguments)), ARGUMENT_LIMITS)
    size = len(json.dumps(summary, default=str))
    if size > MAX_SUMMARY_BYTES:
        return {"…": f"arguments of {size} bytes, not kept"}
    return summary


def _text(value: str, limit: int) -> str:
    # Names come from the caller: no control characters (PostgreSQL refuses NUL in text).
    return "".join(ch for ch in value if ch >= " " and ch != "\x7f")[:limit]


def record_access(
    *,
    surface: str,
    name: str,
    user=None,
    token: ApiToken | None = None,
    project: Project | None = None,
    arguments: dict | None = None,
    outcome: str = "ok",
    duration_ms: float = 0,
    now: dt.datetime | None = None,
) -> AgentAccess:
    """Append one row: `surface` is "mcp" or "feed", `name` the tool or endpoint, `outcome`
    "ok" or the error class answered. `project` is None when the call named none the caller
    may see (such rows are shown to no owner). Never raises for a long name or odd arguments."""
    if surface not in SURFACES:
        raise ValueError(f"surface must be one of {', '.join(SURFACES)}, not {surface!r}")
    row = AgentAccess.objects.create(
        project=project,
        user=user if getattr(user, "is_authenticated", False) else None,
        token=token,
        surface=surface,
        name=_text(name, 128),
        arguments=arguments_summary(arguments),
        outcome=_text(outcome or "ok", 32),
        duration_ms=max(0, round(duration_ms)),
        at=now or timezone.now(),
    )
    if row.pk % PRUNE_EVERY == 0:
        access_prune(project=project, now=row.at)
    return row


def access_prune(*, project: Project | None, now: dt.datetime) -> int:
    """Delete the project's rows older than KEEP_DAYS and beyond its newest MAX_ROWS_PER_PROJECT."""
    rows = AgentAccess.objects.filter(project=project)
    deleted, _ = rows.filter(at__lt=now - dt.timedelta(days=KEEP_DAYS)).delete()
    cut = rows.order_by("-id").values_list("id", flat=True)[MAX_ROWS_PER_PROJECT : MAX_ROWS_PER_PROJECT + 1]
    cut_id = next(iter(cut), None)
    if cut_id is not None:
        deleted += rows.filter(id__lte=cut_id).delete()[0]
    return deleted


def access_for_project(project: Project, *, surface: str = "") -> QuerySet[AgentAccess]:
    """The project's agent calls, newest first, with who made them (owners only: the caller checks)."""
    rows = AgentAccess.objects.filter(project=project).select_related("user", "token")
    if surface:
        rows = rows.filter(surface=surface)
    return rows.order_by("-at", "-id")

