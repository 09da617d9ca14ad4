"""A circuit breaker for an agent's tools that reads Toolwatch's tool-health feed, and never blocks the agent.

    from toolwatch_runner.breaker import CircuitBreaker

    breaker = CircuitBreaker.from_feed("https://toolwatch.example.com", "my-project", token=os.environ["TOOLWATCH_TOKEN"])
    if breaker.allow("search_flights"):
        ...call the tool...
    else:
        advice = breaker.advice("search_flights")  # state, next action, retry_after_s, field, reason

`ToolHealth` polls `GET /api/v1/projects/<slug>/tool-health/` (docs/contract/tool-health.md)
at most every `poll_s` seconds with the ETag it holds (an unchanged feed is a 304), in a
daemon thread: `allow` and `advice` answer from memory at once. It **fails open**: a feed
that cannot be reached, times out (`timeout_s`), answers an error or something that is not
the feed leaves the last good answer in use until it is `stale_after_s` old, and then every
tool is `unknown`, which the breaker allows. Toolwatch being down never stops a call.

`CircuitBreaker.allow(tool)` is False while the feed says the tool is `failing`, except
for one probe call every `probe_s` seconds (the feed's `retry_after_s` when it states one):
the half-open state, so the breaker's own agent finds a recovery as soon as the tool does.
Standard library only.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evals.runner import __version__

FAILING, UNKNOWN = "failing", "unknown"
USER_AGENT = f"toolwatch-runner/{__version__} (tool-health breaker)"


@dataclass(frozen=True, slots=True)
class Advice:
    """What the feed says of one tool: its state, why, and what to do when a call of it fails."""

    state: str = UNKNOWN
    reason: str = "no tool-health feed answer"
    action: str | None = None  # retry, repair, authorize, replace, escalate, ask_user, stop, none
    retry_after_s: int | None = None
    field: str | None = None


class ToolHealth:
    """The project's tool-health feed, polled with If-None-Match and kept in memory."""

    def __init__(self, base_url: str, project: str, *, token: str, poll_s: float = 30.0, timeout_s: float = 2.0,
                 stale_after_s: float = 300.0, background: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self.url = f"{base_url.rstrip('/')}/api/v1/projects/{urllib.parse.quote(project, safe='')}/tool-health/"
        self.token, self.poll_s, self.timeout_s, self.stale_after_s = token, poll_s, timeout_s, stale_after_s
        self.background, self.clock = background, clock
        self.etag: str | None = None
        self.document: dict[str, Any] | None = None
        self.tools: dict[str, dict[str, Any]] = {}
        self.fetched_at: float | None = None  # when the feed last answered (200 or 304)
        self.polled_at: float | None = None  # when it was last asked
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._polling = False

    def refresh(self) -> bool:
        """Ask the feed now (blocking, at most `timeout_s`); True when it answered. Never raises."""
        self.polled_at = self.clock()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", "User-Agent": USER_AGENT}
        if self.etag:
            headers["If-None-Match"] = self.etag
        try:
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url, headers=headers), timeout=self.timeout_s) as r:
                    body, etag = r.read(), r.headers.get("ETag")
            except urllib.error.HTTPError as exc:
                if exc.code != 304:
                    raise
                self.fetched_at, self.last_error = self.clock(), None
                return True
            document = json.loads(body)
            tools = {entry["tool"]: entry for entry in document["tools"]}
        except Exception as exc:  # fail open: whatever went wrong, the agent goes on
            self.last_error = f"{type(exc).__name__}: {exc}"
            return False
        with self._lock:
            self.document, self.tools, self.etag = document, tools, etag
            self.fetched_at, self.last_error = self.clock(), None
        return True

    def _poll_if_due(self) -> None:
        if self.polled_at is not None and self.clock() - self.polled_at < self.poll_s:
            return
        if not self.background:
            self.refresh()
            return
        with self._lock:
            if self._polling:
                return
            self._polling = True
            self.polled_at = self.clock()

        def poll() -> None:
            try:
                self.refresh()
            finally:
                self._polling = False

        threading.Thread(target=poll, name="toolwatch-tool-health", daemon=True).start()

    def entry(self, tool: str) -> dict[str, Any] | None:
        """The feed's entry for the tool; None when the feed has none or its last answer is stale."""
        self._poll_if_due()
        with self._lock:
            if self.fetched_at is None or self.clock() - self.fetched_at > self.stale_after_s:
                return None
            return self.tools.get(tool)

    def advice(self, tool: str) -> Advice:
        entry = self.entry(tool)
        if entry is None:
            reason = f"tool-health feed unavailable ({self.last_error})" if self.last_error else "no feed entry for the tool"
            return Advice(reason=reason)
        action = entry.get("next_action") or {}
        return Advice(state=entry.get("state", UNKNOWN), reason=entry.get("reason", ""), action=action.get("action"),
                      retry_after_s=action.get("retry_after_s"), field=action.get("field"))  # fmt: skip


class CircuitBreaker:
    """Open (deny) while the feed says a tool is failing, with a probe call every `probe_s`; open
    never because Toolwatch is unreachable."""

    def __init__(self, health: ToolHealth, *, probe_s: float = 30.0) -> None:
        self.health, self.probe_s = health, probe_s
        self._next_probe: dict[str, float] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_feed(cls, base_url: str, project: str, *, token: str, probe_s: float = 30.0, **options) -> CircuitBreaker:
        return cls(ToolHealth(base_url, project, token=token, **options), probe_s=probe_s)

    def advice(self, tool: str) -> Advice:
        return self.health.advice(tool)

    def allow(self, tool: str) -> bool:
        """Whether to call the tool now: True unless it is failing (then once per probe interval)."""
        advice = self.health.advice(tool)
        now = self.health.clock()
        with self._lock:
            if advice.state != FAILING:
                self._next_probe.pop(tool, None)
                return True
            wait = advice.retry_after_s or self.probe_s
            due = self._next_probe.get(tool)
            if due is None:  # just opened: the first probe after one interval
                self._next_probe[tool] = now + wait
                return False
            if now < due:
                return False
            self._next_probe[tool] = now + wait  # half-open: this call is the probe
            return True
