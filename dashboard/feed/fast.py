"""The tool-health feed's fast path: a WSGI layer in front of Django that answers an agent's poll of
`/api/v1/projects/<slug>/tool-health/` (and `…/<tool>/`) from memory, in microseconds
(docs/contract/tool-health.md#polling-cost).

Why a WSGI layer and not a view that skips DRF: Django's middleware and URL resolving alone
cost ~0.6 ms a request here. On one gunicorn worker (gthread, 4 threads, load ~1) `/healthz`, a
view that returns a constant, answered 1,200 requests/s and a bare WSGI callable 5,000; the
feed's figures through both paths are in docs/benchmarks.md#tool-health-feed.

It answers only what it can answer exactly as the DRF views (dashboard/api/tool_health.py) do:
GET and HEAD of the two feed routes (as Django's resolver reads the path), no query string,
`Authorization: Bearer|Token <one token>`, an Accept that DRF answers with JSON (none, `*/*`,
`application/*`, `application/json`), a host in ALLOWED_HOSTS and no pending https redirect.
Everything else (sessions, other schemes, a malformed header, OPTIONS, a query string, another
Accept, any other path) goes to Django untouched. The checks and their order are the DRF view's:

1. the token (401 with `WWW-Authenticate`, dashboard/api/auth.py's messages): looked up with
   `tokens.api_token_authenticate` and kept with the slugs of the projects its user may read;
   every TOKEN_TTL_S all kept tokens are read again together (`_sweep`, a few queries however
   many), so a revocation, a deactivated user or a membership change takes effect within
   TOKEN_TTL_S (an expiry is checked on every request); an unknown token is never kept;
2. the operation's scope (`read`): a 403 naming it;
3. the `agent` throttle: the view's own class (dashboard/throttles.py: DRF's algorithm, with Redis
   one atomic script a poll), so both paths, the MCP and, with Redis, every process share one
   budget: a 429 with Retry-After; with Redis unreachable it counts in this process, never a 500;
4. membership: an outsider or an unknown slug is the same 404;
5. the answer: the stored snapshot's bytes and ETag, kept in memory and checked against the
   stored row's ETag at most once per SNAPSHOT_CHECK_S per project (the snapshot changes once a
   minute at most; a stale one is recomputed as the view does); If-None-Match is a 304;
6. the access log: the first 200 or 304 of each minute per caller, token, project and endpoint
   (`tool_health.access_due`, shared with the views), and the token's last use once a minute.

Headers are the view's (ETag, Cache-Control, Content-Type, Vary, Allow) and what the middleware
adds (X-Frame-Options, Content-Length, Content-Security-Policy, HSTS on https, nosniff,
Referrer-Policy, Cross-Origin-Opener-Policy), rebuilt from the settings and in their order;
tests/dashboard/feed/test_fast_path.py compares both paths' answers byte for byte.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from time import monotonic, perf_counter
from types import SimpleNamespace

from csp.constants import HEADER as CSP_HEADER
from csp.constants import HEADER_REPORT_ONLY as CSP_HEADER_REPORT_ONLY
from csp.utils import build_policy
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest, get_path_info
from django.core.signals import setting_changed
from django.db import close_old_connections
from django.urls import Resolver404, resolve
from django.utils import timezone
from rest_framework.exceptions import Throttled
from rest_framework.renderers import JSONRenderer

from dashboard import tokens
from dashboard.agent_access import record_access
from dashboard.api import auth, tool_health
from dashboard.feed import snapshot as feed
from dashboard.models import ApiToken, ToolHealthSnapshot
from ingest.models import Membership, Project, hash_api_key

# A token's user, scopes and readable projects are read again this often: the delay before a
# revocation or a membership change reaches a poller (docs/contract/tool-health.md#polling-cost).
TOKEN_TTL_S = 5.0
# A project's snapshot in memory is compared with the stored row's ETag this often.
SNAPSHOT_CHECK_S = 1.0
# Memory bounds: past them a table is emptied and refilled (a few lookups, then as before).
MAX_TOKENS = 10_000
MAX_PATHS = 10_000
MAX_TOOL_ANSWERS = 1_000  # per project: one tool's answers, unknown tools included
SWEEP_CHUNK = 500  # tokens revalidated per query (SQLite's and PostgreSQL's parameter limits are far above)
ROUTES = {"api-tool-health": "tool-health", "api-tool-health-tool": "tool-health/<tool>"}
JSON_RANGES = frozenset({"*/*", "application/*", "application/json"})
ALLOW = "GET, HEAD, OPTIONS"  # what DRF's finalize_response sets on both views
NO_SUCH_PROJECT = "no such project"  # dashboard/scoping.py's 404, as DRF renders it
REASONS = {200: "200 OK", 304: "304 Not Modified", 401: "401 Unauthorized", 403: "403 Forbidden",
           404: "404 Not Found", 429: "429 Too Many Requests"}  # fmt: skip

logger = logging.getLogger(__name__)
request_logger = logging.getLogger("django.request")  # where Django logs every 4xx it answers


@contextlib.contextmanager
def _database():
    """Around the rare database work: what Django's request_started and request_finished do for
    it (a connection that broke or outlived CONN_MAX_AGE is closed), which a poll answered from
    memory skips."""
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


@dataclass(slots=True)
class _Caller:
    token: ApiToken  # with its user
    projects: dict[str, int]  # slug -> id of every project the user may read


@dataclass(slots=True)
class _Feed:
    project: Project
    snapshot: ToolHealthSnapshot
    body: bytes
    next_check: float  # monotonic() of the next version check
    tools: dict[str, tuple[bytes, str]] = field(default_factory=dict)

    def tool(self, name: str) -> tuple[bytes, str]:
        answer = self.tools.get(name)
        if answer is None:
            answer = feed.encode(feed.tool_entry(self.snapshot, name))
            if len(self.tools) >= MAX_TOOL_ANSWERS:
                self.tools.clear()
            self.tools[name] = answer
        return answer


@dataclass(frozen=True, slots=True)
class _Decoration:
    """The headers the middleware adds (config/settings.py MIDDLEWARE), read from the settings
    as each middleware reads them."""

    x_frame_options: str
    csp: tuple[tuple[str, str, tuple[str, ...]], ...]  # (header, policy, excluded path prefixes)
    hsts: str
    security: tuple[tuple[str, str], ...]  # SecurityMiddleware's, after HSTS
    # Settings read on every request, read once (a settings attribute costs a lookup through LazySettings).
    debug: bool
    ssl_redirect: bool
    not_modified_type: str  # what HttpResponse(status=304) carries
    proxy_ssl_header: str | None  # the WSGI key of SECURE_PROXY_SSL_HEADER

    @classmethod
    def from_settings(cls) -> _Decoration:
        csp = []
        for header, setting, report_only in ((CSP_HEADER, "CONTENT_SECURITY_POLICY", False),
                                             (CSP_HEADER_REPORT_ONLY, "CONTENT_SECURITY_POLICY_REPORT_ONLY", True)):  # fmt: skip
            policy = build_policy(report_only=report_only)
            if policy:
                csp.append((header, policy, tuple((getattr(settings, setting, None) or {}).get("EXCLUDE_URL_PREFIXES") or ())))
        hsts = ""
        if settings.SECURE_HSTS_SECONDS:
            hsts = f"max-age={settings.SECURE_HSTS_SECONDS}"
            hsts += "; includeSubDomains" if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS else ""
            hsts += "; preload" if settings.SECURE_HSTS_PRELOAD else ""
        security = []
        if settings.SECURE_CONTENT_TYPE_NOSNIFF:
            security.append(("X-Content-Type-Options", "nosniff"))
        referrer = settings.SECURE_REFERRER_POLICY
        if referrer:
            parts = [v.strip() for v in referrer.split(",")] if isinstance(referrer, str) else referrer
            security.append(("Referrer-Policy", ",".join(parts)))
        if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
            security.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
        proxy = settings.SECURE_PROXY_SSL_HEADER
        return cls(getattr(settings, "X_FRAME_OPTIONS", "DENY").upper(), tuple(csp), hsts, tuple(security),
                   settings.DEBUG, settings.SECURE_SSL_REDIRECT, f"text/html; charset={settings.DEFAULT_CHARSET}",
                   proxy[0] if proxy else None)  # fmt: skip

    def headers(self, view: list[tuple[str, str]], body_length: int, *, status: int, secure: bool, path: str) -> list:
        headers = [*view, ("X-Frame-Options", self.x_frame_options), ("Content-Length", str(body_length))]
        if not (self.debug and status == 404):  # django-csp leaves DEBUG's 404 pages alone
            headers += [(name, policy) for name, policy, excluded in self.csp if not path.startswith(excluded)]
        if self.hsts and secure:
            headers.append(("Strict-Transport-Security", self.hsts))
        return headers + list(self.security)


def json_accepted(header: str | None) -> bool:
    """Whether DRF's content negotiation answers this Accept with its JSON renderer, as plainly as
    this path renders (no `indent=` or other parameter but q)."""
    if not header or header in JSON_RANGES:
        return True
    for item in header.split(","):
        media, *parameters = item.split(";")
        if media.strip() not in JSON_RANGES or any(not p.strip().startswith("q=") for p in parameters):
            return False
    return True


def _fresh(current: _Feed | None, tick: float, now) -> bool:
    """Whether a snapshot in memory is answered without a version check."""
    return current is not None and tick < current.next_check and now - current.snapshot.computed_at <= feed.STALE_AFTER


class FeedFastPath:
    """WSGI middleware: the feed's polls answered here, every other request passed to `application`."""

    def __init__(self, application) -> None:
        self.application = application
        self._routes: dict[str, tuple[str, str | None, str] | None] = {}
        self._hosts: dict[tuple, bool | None] = {}
        self._callers: dict[str, _Caller] = {}
        self._feeds: dict[int, _Feed] = {}
        self._feed_lock = threading.Lock()
        self._sweep_lock = threading.Lock()
        self._sweep_at = 0.0  # monotonic() of the next revalidation of every cached token
        self._decoration: _Decoration | None = None
        setting_changed.connect(self._forget_settings)

    def __call__(self, environ, start_response):
        if (
            environ.get("REQUEST_METHOD") in ("GET", "HEAD")
            and "/tool-health/" in environ.get("PATH_INFO", "")
            and not environ.get("QUERY_STRING")
            and environ.get("HTTP_AUTHORIZATION")
        ):
            try:
                answer = self.answer(environ)
            except Exception:  # Django answers it instead, as it would have without this layer
                logger.exception("tool-health fast path failed on %s; passed to Django", environ.get("PATH_INFO"))
                answer = None
            if answer is not None:
                status, headers, body = answer
                start_response(status, headers)
                return [body]
        return self.application(environ, start_response)

    def _forget_settings(self, **kwargs) -> None:
        self._decoration = None
        self._routes.clear()  # ROOT_URLCONF may be what changed
        self._hosts.clear()  # or ALLOWED_HOSTS, or SECURE_PROXY_SSL_HEADER

    # --- the answer ------------------------------------------------------------------------

    def answer(self, environ) -> tuple[str, list, bytes] | None:
        """(status line, headers, body) of a feed poll, or None for Django to answer it."""
        route = self._route(environ)
        if route is None or not json_accepted(environ.get("HTTP_ACCEPT")):
            return None
        slug, tool, path_info = route
        try:  # as DRF's get_authorization_header and TokenAuthentication read it
            parts = environ["HTTP_AUTHORIZATION"].encode("latin-1").split()
            if len(parts) != 2 or parts[0].lower() not in auth.SCHEMES:
                return None
            raw = parts[1].decode("ascii")
        except (UnicodeEncodeError, UnicodeDecodeError):
            return None
        secure = self._secure(environ)
        if secure is None:
            return None  # a host not in ALLOWED_HOSTS: CommonMiddleware's 400
        if self.decoration.ssl_redirect and not secure:
            return None  # SecurityMiddleware redirects it (or serves it, if exempt)
        method = environ["REQUEST_METHOD"]
        started = perf_counter()
        now = timezone.now()

        caller = self._caller(raw, now)
        if isinstance(caller, str):
            authenticate = [("WWW-Authenticate", auth.TokenAuthentication().authenticate_header(None))]
            return self._error(environ, 401, {"detail": caller}, authenticate, secure=secure, path=path_info)
        token = caller.token
        if token.last_used_at is None or now - token.last_used_at >= tokens.TOKEN_TOUCH_INTERVAL:
            with _database():
                tokens.api_token_touch(token=token, now=now)
        view = tool_health.ProjectToolHealth if tool is None else tool_health.OneToolHealth
        accepted = auth.view_scopes(view, method)
        if not any(tokens.token_has_scope(token, scope) for scope in accepted):
            return self._error(environ, 403, tokens.ScopeDenied(accepted[0]).body(), secure=secure, path=path_info)
        throttle = tool_health.AgentThrottle()
        if not throttle.allow_request(SimpleNamespace(user=token.user), view):
            refused = Throttled(throttle.wait())
            retry_after = [("Retry-After", "%d" % refused.wait)] if refused.wait else []  # as DRF's exception_handler
            return self._error(environ, 429, {"detail": refused.detail}, retry_after, secure=secure, path=path_info)
        project_id = caller.projects.get(slug)
        current = None if project_id is None else self._feed(project_id, now)
        if current is None:
            return self._error(environ, 404, {"detail": NO_SUCH_PROJECT}, secure=secure, path=path_info)

        if tool is None:
            body, etag, name, arguments = current.body, current.snapshot.etag, ROUTES["api-tool-health"], {}
        else:
            (body, etag), name, arguments = current.tool(tool), ROUTES["api-tool-health-tool"], {"tool": tool}
        view_headers = [("ETag", etag), ("Cache-Control", tool_health.CACHE_CONTROL),
                        ("Vary", tool_health.VARY + ", Accept"), ("Allow", ALLOW)]  # fmt: skip
        if tool_health.etag_matches(environ.get("HTTP_IF_NONE_MATCH"), etag):
            status, body = 304, b""
            view_headers.insert(0, ("Content-Type", self.decoration.not_modified_type))
        else:
            status = 200
            view_headers.insert(0, ("Content-Type", "application/json"))
        headers = self.decoration.headers(view_headers, len(body), status=status, secure=secure, path=path_info)
        if tool_health.access_due(user_id=token.user_id, token_id=token.pk, slug=slug, name=name, arguments=arguments,
                                  now=now):  # fmt: skip
            with _database():
                record_access(surface="feed", name=name, user=token.user, token=token, project=current.project,
                              arguments=arguments, duration_ms=(perf_counter() - started) * 1000, now=now)  # fmt: skip
        return REASONS[status], headers, b"" if method == "HEAD" else body

    @property
    def decoration(self) -> _Decoration:
        if self._decoration is None:
            self._decoration = _Decoration.from_settings()
        return self._decoration

    def _error(self, environ, status: int, data: dict, extra: list | tuple = (), *, secure: bool, path: str):
        """An error as DRF's exception handler and JSON renderer answer it, logged as Django logs it."""
        body = JSONRenderer().render(data)
        view_headers = [("Content-Type", "application/json"), *extra, ("Vary", "Accept"), ("Allow", ALLOW)]
        headers = self.decoration.headers(view_headers, len(body), status=status, secure=secure, path=path)
        request = WSGIRequest(environ)
        request_logger.warning("%s: %s", REASONS[status].partition(" ")[2], request.path,
                               extra={"status_code": status, "request": request})  # fmt: skip
        return REASONS[status], headers, b"" if request.method == "HEAD" else body

    # --- what is kept in memory --------------------------------------------------------------

    def _route(self, environ) -> tuple[str, str | None, str] | None:
        """(slug, tool or None, path) when Django's resolver routes this path to a feed view, else None."""
        raw = environ.get("PATH_INFO", "")
        try:
            return self._routes[raw]
        except KeyError:
            pass
        path_info = get_path_info(environ)
        try:
            match = resolve(path_info)
        except Resolver404:
            route = None
        else:
            route = (match.kwargs["project"], match.kwargs.get("tool"), path_info) if match.url_name in ROUTES else None
        if len(self._routes) >= MAX_PATHS:
            self._routes.clear()
        self._routes[raw] = route
        return route

    def _secure(self, environ) -> bool | None:
        """Whether the request came over https as Django reads it (SECURE_PROXY_SSL_HEADER); None when
        its host is not in ALLOWED_HOSTS. Django's own answer, kept per set of the headers it reads."""
        key = (environ.get("HTTP_X_FORWARDED_HOST"), environ.get("HTTP_HOST"), environ.get("SERVER_NAME"),
               environ.get("SERVER_PORT"), environ.get(self.decoration.proxy_ssl_header), environ.get("wsgi.url_scheme"))  # fmt: skip
        try:
            return self._hosts[key]
        except KeyError:
            pass
        request = WSGIRequest(environ)
        try:
            request.get_host()
            secure = request.is_secure()
        except DisallowedHost:
            secure = None
        if len(self._hosts) >= MAX_PATHS:
            self._hosts.clear()
        self._hosts[key] = secure
        return secure

    def _caller(self, raw: str, now) -> _Caller | str:
        """The token's cached caller, or looked up; the 401's message when it does not authenticate."""
        if monotonic() >= self._sweep_at:
            self._sweep(now)
        key = hash_api_key(raw.strip())
        caller = self._callers.get(key)
        if caller is not None and not caller.token.is_expired(now):
            return caller
        with _database():
            try:
                token = tokens.api_token_authenticate(raw, now=now)
            except tokens.TokenError as exc:
                self._callers.pop(key, None)
                return str(exc)
            readable = Project.objects.all() if token.user.is_superuser else Project.objects.filter(members=token.user)
            caller = _Caller(token, dict(readable.values_list("slug", "id")))
        if len(self._callers) >= MAX_TOKENS:
            self._callers.clear()
        self._callers[key] = caller
        return caller

    def _sweep(self, now) -> None:
        """Every TOKEN_TTL_S, every cached token read again with its user and projects, in three
        queries a chunk of tokens (not three per token): a token revoked, expired or whose user is
        inactive is dropped (its next poll looks it up, and gets the 401 saying why)."""
        with self._sweep_lock:  # the other threads wait the few milliseconds rather than answer from stale entries
            if monotonic() < self._sweep_at:
                return
            keys = list(self._callers)
            fresh: dict[str, _Caller] = {}
            if keys:
                with _database():
                    for chunk in range(0, len(keys), SWEEP_CHUNK):
                        found = ApiToken.objects.select_related("user").filter(hashed_token__in=keys[chunk : chunk + SWEEP_CHUNK])
                        live = [t for t in found if t.is_active(now) and t.user.is_active]
                        readable: dict[int, dict[str, int]] = {t.user_id: {} for t in live}
                        for user_id, slug, project_id in Membership.objects.filter(user_id__in=list(readable)).values_list(
                                "user_id", "project__slug", "project_id"):  # fmt: skip
                            readable[user_id][slug] = project_id
                        if any(t.user.is_superuser for t in live):
                            every = dict(Project.objects.values_list("slug", "id"))
                            readable.update({t.user_id: every for t in live if t.user.is_superuser})
                        fresh.update({t.hashed_token: _Caller(t, readable[t.user_id]) for t in live})
            self._callers = fresh
            self._sweep_at = monotonic() + TOKEN_TTL_S

    def _feed(self, project_id: int, now) -> _Feed | None:
        """The project's snapshot in memory, checked against the stored one once per SNAPSHOT_CHECK_S
        (one thread checks, the others answer from memory meanwhile); None when the project is gone."""
        current = self._feeds.get(project_id)
        if _fresh(current, monotonic(), now):
            return current
        with self._feed_lock:
            current = self._feeds.get(project_id)
            tick = monotonic()
            if _fresh(current, tick, now):
                return current  # another thread has just checked
            with _database():
                head = feed.snapshot_head(project_id=project_id)
                if current is not None and head is not None and head[0] == current.snapshot.etag:
                    if now - head[1] <= feed.STALE_AFTER:
                        current.next_check = tick + SNAPSHOT_CHECK_S
                        return current
                project = Project.objects.filter(pk=project_id).first()
                if project is None:
                    self._feeds.pop(project_id, None)
                    return None
                snapshot = feed.tool_health_current(project=project, now=now)
            current = _Feed(project, snapshot, snapshot.payload.encode(), tick + SNAPSHOT_CHECK_S)
            self._feeds[project_id] = current
            return current
