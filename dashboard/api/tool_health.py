"""`/api/v1/projects/<slug>/tool-health/` and `…/tool-health/<tool>/`: the tool-health feed for agents'
circuit breakers (docs/contract/tool-health.md).

Cheap to poll: the project's answer is the stored snapshot's bytes (dashboard/feed/snapshot.py)
with its strong ETag; `If-None-Match` with that ETag is a 304 with no body. Authentication,
token scopes and permissions are the API's defaults; throttled with the `agent` scope.

These views are the documented ones (the OpenAPI schema describes them) and answer sessions
and anything unusual. A poll with a personal token is answered before Django's stack by
dashboard/feed/fast.py, from memory, with the same answers (tests/dashboard/feed/test_fast_path.py
compares both); it shares `etag_matches`, the headers and `access_due` with these views.
"""

from __future__ import annotations

import threading
import time

from django.http import HttpResponse
from django.urls import path
from django.utils import timezone
from django.utils.http import parse_etags
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.views import APIView

from dashboard.agent_access import record_access
from dashboard.api.base import ProjectScopedMixin
from dashboard.feed import snapshot as feed
from dashboard.feed.state import STATES
from dashboard.models import ApiToken
from dashboard.throttles import ScopedRateThrottle
from ingest.taxonomy import ERROR_CLASSES, NEXT_ACTIONS

# --- output shapes (documentation for the schema; the views serve the stored JSON) -------------


class RatesSerializer(serializers.Serializer):
    calls = serializers.IntegerField(help_text="Logical calls in the window.")
    error_rate = serializers.FloatField(allow_null=True, help_text="errors / calls; null without calls.")
    retry_rate = serializers.FloatField(allow_null=True, help_text="retries / calls.")
    wasted_retry_rate = serializers.FloatField(allow_null=True, help_text="Retries after a permanent-class failure / calls.")


class NextActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(NEXT_ACTIONS), help_text="The dominant class's next action.")
    description = serializers.CharField()
    retry_after_s = serializers.IntegerField(allow_null=True, help_text="retry: the longest retry-after stated, in seconds.")
    field = serializers.CharField(allow_null=True, help_text="repair: the field validation failures named most.")


class FeedAlertSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    opened_at = serializers.DateTimeField()
    muted = serializers.BooleanField()
    summary = serializers.CharField()


class ToolHealthSerializer(RatesSerializer):
    tool = serializers.CharField()
    state = serializers.ChoiceField(choices=list(STATES))
    reason = serializers.CharField(help_text="Why the state, in one sentence.")
    errors = serializers.IntegerField()
    errors_by_class = serializers.DictField(
        child=serializers.IntegerField(), help_text=f"Failed calls per class ({', '.join(ERROR_CLASSES)}), non-zero only."
    )
    failed_attempts_by_class = serializers.DictField(
        child=serializers.IntegerField(), help_text="Failed attempts (retries included) per class: what the dominant class is of."
    )
    baseline = RatesSerializer(help_text="The drift baseline: 7 days ending 6 h before the hour.")
    dominant_class = serializers.CharField(allow_null=True)
    next_action = NextActionSerializer(allow_null=True)
    open_alerts = FeedAlertSerializer(many=True)


class WindowSerializer(serializers.Serializer):
    project = serializers.CharField()
    as_of = serializers.DateTimeField(help_text="When the snapshot was computed from the rollups.")
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField(help_text="The newest 5-minute bucket's end: it may still be filling.")
    baseline_start = serializers.DateTimeField()
    baseline_end = serializers.DateTimeField()


class ProjectHealthSerializer(WindowSerializer):
    tools = ToolHealthSerializer(many=True)


class OneToolHealthSerializer(WindowSerializer, ToolHealthSerializer):
    pass


PROJECT = OpenApiParameter("project", OpenApiTypes.STR, OpenApiParameter.PATH, description="The project's slug.")
TOOL = OpenApiParameter("tool", OpenApiTypes.STR, OpenApiParameter.PATH, description="The tool's name.")
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match", OpenApiTypes.STR, OpenApiParameter.HEADER, description="The ETag of the answer you hold."
)
NOT_MODIFIED = OpenApiResponse(description="Unchanged since the ETag sent in If-None-Match (no body).")
NOT_FOUND = OpenApiResponse(
    inline_serializer("ToolHealthNotFound", {"detail": serializers.CharField()}),
    description="No such project among yours (the same answer whether or not it exists).",
)


CACHE_CONTROL = f"private, max-age={feed.MAX_AGE_S}"
VARY = "Authorization, Cookie"


def etag_matches(header: str | None, etag: str) -> bool:
    """Whether an If-None-Match header holds `etag`: the weak comparison (RFC 9110 13.1.2),
    W/"x" matches "x", and `*` matches any."""
    if not header:
        return False
    if header == etag:  # what a poller sends back: no parsing
        return True
    return any(tag == "*" or tag.removeprefix("W/") == etag for tag in parse_etags(header))


def _matches(request, etag: str) -> bool:
    return etag_matches(request.headers.get("If-None-Match"), etag)


def _answer(request, body: bytes | str, etag: str) -> HttpResponse:
    response = HttpResponse(status=304) if _matches(request, etag) else HttpResponse(body, content_type="application/json")
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    response["Vary"] = VARY
    return response


class AgentThrottle(ScopedRateThrottle):
    """The `agent` scope, per user: its rate read per request, and counted in this process while
    the cache is down (dashboard/throttles.py), never a 500 to a polling agent."""


# The access log gets the first request of each minute per caller, project and endpoint (per
# process): polling at 2,000 requests a second must not write 2,000 rows a second.
_logged: dict[tuple, int] = {}
_LOGGED_KEPT = 10_000
_logged_lock = threading.Lock()


def access_due(*, user_id: int, token_id: int | None, slug: str, name: str, arguments: dict, now) -> bool:
    """Whether this request is the first of its minute for its caller, token, project, endpoint and
    arguments in this process, and so is to be written to the access log (it claims the minute).
    Shared by these views and the fast path (dashboard/feed/fast.py): one row a minute for both."""
    key = (user_id, token_id, slug, name, tuple(arguments.items()))
    minute = int(now.timestamp() // 60)
    with _logged_lock:
        if _logged.get(key) == minute:
            return False
        if len(_logged) >= _LOGGED_KEPT:
            _logged.clear()
        _logged[key] = minute
    return True


def _log_access(request, view, name: str, arguments: dict, started: float) -> None:
    token = request.auth if isinstance(request.auth, ApiToken) else None
    now = timezone.now()
    if access_due(user_id=request.user.pk, token_id=token.pk if token else None, slug=view.kwargs["project"], name=name,
                  arguments=arguments, now=now):  # fmt: skip
        record_access(surface="feed", name=name, user=request.user, token=token, project=view.project,
                      arguments=arguments, duration_ms=(time.perf_counter() - started) * 1000, now=now)  # fmt: skip


class FeedView(ProjectScopedMixin, APIView):
    throttle_classes = [AgentThrottle]  # the `agent` rate alone (config/settings.py)
    throttle_scope = "agent"


class ProjectToolHealth(FeedView):
    @extend_schema(
        operation_id="tool_health_list",
        summary="The tool-health feed",
        description="Per tool: state (ok, degraded, failing, unknown) and why, the last 15 minutes' error, retry and "
        "wasted-retry rates beside the baseline's, open alerts, the dominant error class and its next action. "
        "Served from a snapshot refreshed with the rollups: send the ETag back in If-None-Match for a 304.",
        tags=["tool-health"],
        parameters=[PROJECT, IF_NONE_MATCH],
        responses={200: ProjectHealthSerializer, 304: NOT_MODIFIED, 404: NOT_FOUND},
    )
    def get(self, request, project):
        started = time.perf_counter()
        head = feed.snapshot_etag(user=request.user, slug=project)
        if head is not None and _matches(request, head[1]):  # the hot path: one query, no payload read
            response = _answer(request, b"", head[1])
        else:
            snapshot = feed.tool_health_current(project=self.project)
            response = _answer(request, snapshot.payload, snapshot.etag)
        _log_access(request, self, "tool-health", {}, started)
        return response


class OneToolHealth(FeedView):
    @extend_schema(
        operation_id="tool_health_retrieve",
        summary="One tool's health",
        description="The feed's entry for one tool, with the window; a tool the feed has no calls or alerts of is "
        "`unknown`. Its own ETag; If-None-Match as for the whole feed.",
        tags=["tool-health"],
        parameters=[PROJECT, TOOL, IF_NONE_MATCH],
        responses={200: OneToolHealthSerializer, 304: NOT_MODIFIED, 404: NOT_FOUND},
    )
    def get(self, request, project, tool):
        started = time.perf_counter()
        snapshot = feed.tool_health_current(project=self.project)
        body, etag = feed.encode(feed.tool_entry(snapshot, tool))
        response = _answer(request, body, etag)
        _log_access(request, self, "tool-health/<tool>", {"tool": tool}, started)
        return response


urlpatterns = [
    path("projects/<slug:project>/tool-health/", ProjectToolHealth.as_view(), name="api-tool-health"),
    path("projects/<slug:project>/tool-health/<path:tool>/", OneToolHealth.as_view(), name="api-tool-health-tool"),
]
