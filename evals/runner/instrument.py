"""Record a tool's error envelope on its OpenTelemetry span: `@tool_call`, `ToolError`, `envelope`.

    from toolwatch_runner.instrument import ToolError, envelope, tool_call

    @tool_call(name="search_flights")
    def search_flights(origin: str, date: str):
        if busy:
            raise ToolError("upstream busy", error_class="transient", retry_after=2)
        if not valid(date):
            return envelope("validation", "date must be YYYY-MM-DD", field="date", suggestion="send 2026-11-20")
        ...

Where `opentelemetry` is importable, each call of a decorated function runs in an
`execute_tool <name>` span (the GenAI convention; with `start_span=False` the current span
is used, for frameworks that make the tool span themselves) carrying `tool.call.attempt`
(1, then 2, 3… for the calls of the tool in the same trace after a failure of it, until
one succeeds: docs/contract/attempts.md#explicit-retry-markers), and, when the call fails
(it raises, or returns an error envelope), the `tool.error.*` envelope: `class`,
`retryable`, `field`, `suggestion`, `retry_after_ms`, `message`, `code`
(docs/contract/error-classes.md#stored-failure-fields). The failure is read with
Toolwatch's own classifier (`evals.judge.observe`, the eval runner's), so the span says
what the server will make of it; `retryable` not stated by the tool is its class's verdict.
A tool that states its class, retryable flag, retry-after (transient) and field and
suggestion (validation), in a specific message, gets every contract check
(docs/contract/metrics.md#contract-quality).

Without `opentelemetry` the decorator calls the function and nothing else. Exceptions are
always re-raised and results returned unchanged. Standard library only (the opentelemetry
import is optional and lazy): the runner's distribution ships it.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from evals.judge import observe
from ingest import taxonomy

# (trace id, tool) -> attempts since the tool last succeeded in that trace; bounded, oldest dropped.
_ATTEMPTS: OrderedDict[tuple[int, str], int] = OrderedDict()
_ATTEMPTS_KEPT = 4096
_lock = threading.Lock()
_trace_api: Any = None  # opentelemetry.trace once imported; False when it is not installed


class ToolError(Exception):
    """A tool failure that states its envelope (raise it from a tool; `@tool_call` records it).

    `error_class` is one of Toolwatch's classes (transient, validation, permission, not_found,
    business, user_input, fatal) or a spelling of one (`rate_limited`, `INVALID_ARGUMENT`);
    `retry_after` is in seconds; `retryable` defaults to the class's own verdict."""

    def __init__(self, message: str, *, error_class: str, retryable: bool | None = None, field: str | None = None,
                 suggestion: str | None = None, retry_after: float | None = None, code: str | None = None) -> None:  # fmt: skip
        super().__init__(message)
        self.message = message
        self.envelope = envelope(error_class, message, retryable=retryable, field=field, suggestion=suggestion,
                                 retry_after=retry_after, code=code)  # fmt: skip


def envelope(error_class: str, message: str, *, retryable: bool | None = None, field: str | None = None,
             suggestion: str | None = None, retry_after: float | None = None, code: str | None = None) -> dict:  # fmt: skip
    """An error envelope to return as a tool's result (MCP's `isError` shape, docs/contract/error-classes.md#soft-failures):
    the model reads it, the controller routes on it, Toolwatch classifies it."""
    cls = taxonomy.class_for_spelling(error_class) or error_class
    if retryable is None:
        retryable = taxonomy.CLASSES[cls].retryable if cls in taxonomy.CLASSES else None
    error: dict[str, Any] = {"class": cls, "message": message}
    for key, value in (("code", code), ("retryable", retryable), ("field", field), ("suggestion", suggestion)):
        if value is not None:
            error[key] = value
    if retry_after is not None:
        error["retryAfterMs"] = int(round(retry_after * 1000))
    return {"isError": True, "error": error}


def _otel():
    """opentelemetry.trace, or None when it is not installed (imported once, on first use)."""
    global _trace_api
    if _trace_api is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _trace_api = False
        else:
            _trace_api = trace
    return _trace_api or None


def failure_attributes(tool: str, *, result: Any = None, exception: BaseException | None = None) -> dict[str, Any] | None:
    """The `tool.error.*` attributes of a failed call (a raised exception, or a returned error
    envelope), read with Toolwatch's classifier; None when the call succeeded."""
    if isinstance(exception, ToolError):
        observed = observe(tool, None, result=exception.envelope)
    elif exception is not None:
        observed = observe(tool, None, exception=exception)
    elif isinstance(result, dict):
        observed = observe(tool, None, result=result)
    else:
        return None  # only a JSON object can be an error envelope
    if observed["ok"]:
        return None
    cls = observed["error_class"] or taxonomy.UNKNOWN
    retryable = observed["retryable"]
    if retryable is None and cls in taxonomy.CLASSES:
        retryable = taxonomy.CLASSES[cls].retryable
    attributes: dict[str, Any] = {"tool.error.class": cls, "tool.error.message": observed["message"]}
    for key, value in (("retryable", retryable), ("field", observed["field"]), ("suggestion", observed["suggestion"]),
                       ("retry_after_ms", observed["retry_after_ms"]), ("code", observed["error_code"])):  # fmt: skip
        if value not in (None, ""):
            attributes[f"tool.error.{key}"] = value
    return attributes


def _next_attempt(trace_id: int, tool: str) -> int:
    with _lock:
        return _ATTEMPTS.get((trace_id, tool), 0) + 1


def _settle_attempt(trace_id: int, tool: str, attempt: int, failed: bool) -> None:
    with _lock:
        key = (trace_id, tool)
        if failed:
            _ATTEMPTS[key] = attempt
            _ATTEMPTS.move_to_end(key)
            while len(_ATTEMPTS) > _ATTEMPTS_KEPT:
                _ATTEMPTS.popitem(last=False)
        else:
            _ATTEMPTS.pop(key, None)


class _Recorder:
    """One call's span bookkeeping (a no-op without OpenTelemetry)."""

    def __init__(self, tool: str, start_span: bool, tracer_provider: Any) -> None:
        self.tool, self.start_span, self.tracer_provider = tool, start_span, tracer_provider
        self.trace = _otel()
        self.scope = None

    def __enter__(self) -> _Recorder:
        if self.trace is None:
            return self
        if self.start_span:
            tracer = self.trace.get_tracer("toolwatch_runner.instrument", tracer_provider=self.tracer_provider)
            self.scope = tracer.start_as_current_span(
                f"execute_tool {self.tool}", record_exception=False, set_status_on_exception=False,
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.tool},
            )  # fmt: skip
            self.span = self.scope.__enter__()
        else:
            self.span = self.trace.get_current_span()
        self.trace_id = self.span.get_span_context().trace_id
        self.attempt = _next_attempt(self.trace_id, self.tool) if self.trace_id else 1
        self.span.set_attribute("tool.name", self.tool)
        self.span.set_attribute("tool.call.attempt", self.attempt)
        return self

    def done(self, *, result: Any = None, exception: BaseException | None = None) -> None:
        if self.trace is None:
            return
        attributes = failure_attributes(self.tool, result=result, exception=exception)
        if attributes:
            self.span.set_attributes(attributes)
            if exception is not None:
                self.span.record_exception(exception)
            self.span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, attributes["tool.error.message"][:1024]))
        if self.trace_id:
            _settle_attempt(self.trace_id, self.tool, self.attempt, failed=bool(attributes))

    def __exit__(self, *exc_info) -> None:
        if self.scope is not None:
            self.scope.__exit__(*exc_info)


def tool_call(name: str | None = None, *, start_span: bool = True, tracer_provider: Any = None) -> Callable[[Callable], Callable]:
    """Decorate a tool function (plain or `async def`) to record its attempts and error envelopes
    on OpenTelemetry spans; `name` defaults to the function's name, `tracer_provider` to the global one."""

    def decorate(function: Callable) -> Callable:
        tool = name or function.__name__

        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def call_async(*args, **kwargs):
                with _Recorder(tool, start_span, tracer_provider) as recorder:
                    try:
                        result = await function(*args, **kwargs)
                    except Exception as exc:
                        recorder.done(exception=exc)
                        raise
                    recorder.done(result=result)
                    return result

            return call_async

        @functools.wraps(function)
        def call(*args, **kwargs):
            with _Recorder(tool, start_span, tracer_provider) as recorder:
                try:
                    result = function(*args, **kwargs)
                except Exception as exc:
                    recorder.done(exception=exc)
                    raise
                recorder.done(result=result)
                return result

        return call

    return decorate
