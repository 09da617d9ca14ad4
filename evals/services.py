"""Writes of the evals app: promote, edit, pin, retire, tag, and record runs (docs/contract/eval-cases.md).

Every service takes keyword arguments and raises `EvalError(field, message)` for anything
the caller asked that cannot be done; views turn it into a form error or a 400 naming
`field`. The expectation itself is validated by `evals.expectations` (shared with the
runner), and pinned versions are hashed by its `content_hash`, so the server and the
runner always agree on what a version is.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from evals import expectations, snapshots
from evals.models import EvalCase, EvalCaseTag, EvalCaseVersion, EvalResult, EvalRun, SnapshotSpan
from evals.signals import RegressionFinding, run_judged
from ingest.models import Project, Span, ToolCall
from ingest.taxonomy import recommended_action

DEFAULT_TIMEOUT_S = 30
MAX_TIMEOUT_S = 3600
MAX_TAGS = 20
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.:/-]{0,63}$")
# What the columns a posted result's integers go to hold (Django's ranges, the same on PostgreSQL and SQLite).
MAX_ID = 2**63 - 1  # BigAutoField: a case's id
MAX_POSITIVE_INT = 2**31 - 1  # PositiveIntegerField: a version's number, a result's duration_ms
UNSET: Any = object()  # "leave as it is", where None is a value (arguments may be null)


class EvalError(ValueError):
    """A request that cannot be done; `field` names the part at fault (a form field, an API key)."""

    def __init__(self, field: str, message: str, *, missing: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.missing = missing  # the thing named does not exist (a 404 rather than a 400)


# --- promotion ---------------------------------------------------------------------------


def promotable_call(*, project: Project, trace_id: str, span_id: str) -> ToolCall:
    """The failed tool call to promote; EvalError naming span_id when there is none or it succeeded."""
    call = ToolCall.objects.filter(project=project, trace_id=trace_id, span_id=span_id).first()
    if call is None:
        raise EvalError("span_id", f"no tool call {span_id} in trace {trace_id} (unknown span, or past retention)", missing=True)
    if call.ok:
        raise EvalError("span_id", f"the {call.tool} call {span_id} succeeded: only failed calls can be promoted")
    return call


def observed_of(call: ToolCall) -> dict[str, Any]:
    """The observed outcome a case keeps, from its tool-call row (the export's `observed`, plus classified_by)."""
    return {
        "error_class": call.error_class,
        "message": call.message,
        "error_type": call.error_type,
        "error_code": call.error_code,
        "retryable": call.retryable,
        "field": call.field,
        "suggestion": call.suggestion,
        "retry_after_ms": call.retry_after_ms,
        # What the error leads to: the action the controller recorded, else the class's own
        # (the same rule the runner's judge applies).
        "next_action": call.next_action or recommended_action(call.error_class),
        "contract": dict(call.contract or {}),
        "fingerprint": call.fingerprint,
        "classified_by": call.classified_by,
        "trace_id": call.trace_id,
        "span_id": call.span_id,
        "observed_at": call.start_time.isoformat().replace("+00:00", "Z"),
    }


def default_title(call: ToolCall) -> str:
    message = " ".join(call.message.split())
    title = f"{call.tool}: {call.error_class}" + (f": {message}" if message else "")
    return title if len(title) <= 120 else title[:119] + "…"


@dataclass(frozen=True)
class Promotion:
    case: EvalCase
    created: bool  # False: the failure had been promoted already; `case` is that case


def case_promote(
    *,
    project: Project,
    trace_id: str,
    span_id: str,
    user=None,
    title: str = "",
    tags: list[str] | tuple[str, ...] = (),
    expect: dict | None = None,
    timeout_s: int = DEFAULT_TIMEOUT_S,
    now: datetime | None = None,
) -> Promotion:
    """Promote the failed call (project, trace_id, span_id) to an eval case with a draft version 1.

    Promoting a failure that already has a case returns that case (created=False), changing
    nothing. The case keeps the observed outcome and a frozen snapshot of the trace (the
    tool span, its ancestors, siblings and descendants, with their tool-call rows). `expect`
    defaults to `expectations.suggest(observed)`.
    """
    existing = EvalCase.objects.filter(project=project, trace_id=trace_id, span_id=span_id).first()
    if existing is not None:
        return Promotion(existing, created=False)
    call = promotable_call(project=project, trace_id=trace_id, span_id=span_id)
    observed = observed_of(call)
    expect = _valid_expect(expectations.suggest(observed) if expect is None else expect)
    timeout_s = _valid_timeout(timeout_s)
    tags = _valid_tags(tags)
    title = _valid_title(title or default_title(call))
    now = now or timezone.now()
    try:
        with transaction.atomic():
            case = EvalCase.objects.create(
                project=project,
                title=title,
                tool=call.tool,
                trace_id=trace_id,
                span_id=span_id,
                observed=observed,
                error_class=call.error_class,
                message=call.message,
                fingerprint=call.fingerprint,
                observed_at=call.start_time,
                latest_version=1,
                created_at=now,
                created_by=_user(user),
            )
            EvalCaseVersion.objects.create(
                case=case, number=1, arguments=call.arguments, expect=expect, timeout_s=timeout_s,
                created_at=now, created_by=_user(user),
            )  # fmt: skip
            EvalCaseTag.objects.bulk_create([EvalCaseTag(case=case, name=name) for name in tags])
            _freeze_snapshot(case)
    except IntegrityError:
        # Promoted concurrently by someone else: theirs is the case.
        return Promotion(EvalCase.objects.get(project=project, trace_id=trace_id, span_id=span_id), created=False)
    return Promotion(case, created=True)


_SPAN_FIELDS = (
    "span_id", "parent_span_id", "name", "kind", "start_time", "end_time", "status_code", "status_message",
    "service", "environment", "agent", "attributes", "resource_attributes", "events",
)  # fmt: skip
_TOOLCALL_SKIP = {"id", "project", "project_id", "received_at"}


def _freeze_snapshot(case: EvalCase) -> None:
    # The snapshot keeps each span's own copy of its resource's attributes (stored once on ingest).
    spans = Span.objects.filter(project_id=case.project_id, trace_id=case.trace_id).with_resource_attributes()
    spans = list(spans.values(*_SPAN_FIELDS))
    for span in spans:
        span["resource_attributes"] = span["resource_attributes"] or {}
    calls = {
        row["span_id"]: _json_ready({k: v for k, v in row.items() if k not in _TOOLCALL_SKIP})
        for row in ToolCall.objects.filter(project_id=case.project_id, trace_id=case.trace_id).values()
    }
    if not any(span["span_id"] == case.span_id for span in spans):
        # The tool-call row outlived its span (or the span was never stored): keep the row alone.
        call = calls[case.span_id]
        spans.append(
            {
                "span_id": case.span_id, "parent_span_id": "", "name": f"execute_tool {case.tool}", "kind": 0,
                "start_time": datetime.fromisoformat(call["start_time"]),
                "end_time": datetime.fromisoformat(call["end_time"]),
                "status_code": 2, "status_message": case.message, "service": call.get("service", ""),
                "environment": call.get("environment", ""), "agent": call.get("agent", ""),
                "attributes": {}, "resource_attributes": {}, "events": [],
            }
        )  # fmt: skip
    rows = snapshots.snapshot_spans(spans, case.span_id)
    SnapshotSpan.objects.bulk_create(
        [
            SnapshotSpan(case=case, position=position, tool_call=calls.get(row["span_id"]), **row)
            for position, row in enumerate(rows)
        ]
    )


def _json_ready(value: dict) -> dict:
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


# --- versions: edit, pin, retire, tags ---------------------------------------------------


def case_edit(
    *,
    case: EvalCase,
    user=None,
    expect: dict | None = None,
    arguments: Any = UNSET,
    timeout_s: int | None = None,
    title: str | None = None,
    now: datetime | None = None,
) -> EvalCaseVersion:
    """Change a case: the title in place; expectation, arguments and timeout on its draft version.

    When the latest version is pinned, the change goes to a new draft version n+1 (a pinned
    version never changes). A retired case cannot be edited. Returns the draft version.
    """
    if case.retired_at is not None:
        raise EvalError("case", "a retired case cannot be edited; restore it first")
    now = now or timezone.now()
    with transaction.atomic():
        case = EvalCase.objects.select_for_update().get(pk=case.pk)
        latest = case.versions.get(number=case.latest_version)
        if title is not None:
            case.title = _valid_title(title)
            case.save(update_fields=["title"])
        changes = {}
        if expect is not None:
            changes["expect"] = _valid_expect(expect)
        if arguments is not UNSET:
            changes["arguments"] = _no_nul("arguments", arguments)
        if timeout_s is not None:
            changes["timeout_s"] = _valid_timeout(timeout_s)
        if not changes or all(getattr(latest, name) == value for name, value in changes.items()):
            return latest
        if latest.is_pinned:
            latest = EvalCaseVersion.objects.create(
                case=case, number=latest.number + 1, arguments=latest.arguments, expect=latest.expect,
                timeout_s=latest.timeout_s, created_at=now, created_by=_user(user),
            )  # fmt: skip
            case.latest_version = latest.number
            case.save(update_fields=["latest_version"])
        for name, value in changes.items():
            setattr(latest, name, value)
        latest.save(update_fields=list(changes))
    return latest


def case_pin(*, case: EvalCase, user=None, now: datetime | None = None) -> EvalCaseVersion:
    """Pin the draft version: it becomes immutable, content-hashed, and the version exports use."""
    if case.retired_at is not None:
        raise EvalError("case", "a retired case cannot be pinned; restore it first")
    now = now or timezone.now()
    with transaction.atomic():
        case = EvalCase.objects.select_for_update().get(pk=case.pk)
        version = case.versions.get(number=case.latest_version)
        if version.is_pinned:
            raise EvalError("version", f"version {version.number} is pinned already; edit the case to start a new one")
        version.content_hash = expectations.content_hash(case.tool, version.arguments, version.expect, version.timeout_s)
        version.pinned_at, version.pinned_by = now, _user(user)
        version.save(update_fields=["content_hash", "pinned_at", "pinned_by"])
        case.pinned_version = version.number
        case.pinned_at = case.pinned_at or now
        case.save(update_fields=["pinned_version", "pinned_at"])
    return version


def case_retire(*, case: EvalCase, now: datetime | None = None) -> EvalCase:
    """Exclude the case from exports and runs; its versions and results stay."""
    if case.retired_at is None:
        case.retired_at = now or timezone.now()
        case.save(update_fields=["retired_at"])
    return case


def case_restore(*, case: EvalCase) -> EvalCase:
    """Undo a retirement."""
    if case.retired_at is not None:
        case.retired_at = None
        case.save(update_fields=["retired_at"])
    return case


def case_set_tags(*, case: EvalCase, tags: list[str] | tuple[str, ...]) -> list[str]:
    """Replace the case's tags (lower-cased, deduplicated); tags are not part of a version."""
    names = _valid_tags(tags)
    with transaction.atomic():
        EvalCaseTag.objects.filter(case=case).exclude(name__in=names).delete()
        have = set(EvalCaseTag.objects.filter(case=case).values_list("name", flat=True))
        EvalCaseTag.objects.bulk_create([EvalCaseTag(case=case, name=name) for name in names if name not in have])
    return names


def parse_tags(text: str) -> list[str]:
    """Tags typed as text: separated by commas or spaces."""
    return [part for part in re.split(r"[,\s]+", text or "") if part]


def _no_nul(field: str, value: Any) -> Any:
    """`value`, unless a string in it (a key or a value, at any depth) holds a NUL: PostgreSQL's
    text and jsonb cannot store one, so it is an EvalError naming `field` (and where in it)."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        at, item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str) and "\x00" in key:
                    raise EvalError(field, f"the key {key[:40]!r}{' in ' + at if at else ''} contains a NUL character")
                stack.append((f"{at}.{key}" if at else str(key), inner))
        elif isinstance(item, list | tuple):
            stack.extend((f"{at}[{index}]", inner) for index, inner in enumerate(item))
        elif isinstance(item, str) and "\x00" in item:
            raise EvalError(field, f"{'the value at ' + at if at else 'it'} contains a NUL character")
    return value


def _valid_expect(expect: Any) -> dict:
    try:
        return expectations.validate(expect)
    except expectations.ExpectationError as exc:
        raise EvalError(exc.field, exc.message) from None


def _valid_timeout(timeout_s: Any) -> int:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or not 1 <= timeout_s <= MAX_TIMEOUT_S:
        raise EvalError("timeout_s", f"must be a whole number of seconds from 1 to {MAX_TIMEOUT_S}, not {timeout_s!r}")
    return timeout_s


def _valid_title(title: str) -> str:
    title = " ".join(str(title).split())
    if not title:
        raise EvalError("title", "must not be empty")
    if len(title) > 200:
        raise EvalError("title", f"at most 200 characters, not {len(title)}")
    return title


def _valid_tags(tags: Any) -> list[str]:
    if isinstance(tags, str) or not isinstance(tags, list | tuple):
        raise EvalError("tags", "must be a list of tags")
    names: list[str] = []
    for tag in tags:
        name = str(tag).strip().lower()
        if not TAG_PATTERN.match(name):
            raise EvalError(
                "tags", f"{str(tag)[:70]!r} is not a tag: letters, digits and _ . : / - only, at most 64 characters"
            )
        if name not in names:
            names.append(name)
    if len(names) > MAX_TAGS:
        raise EvalError("tags", f"at most {MAX_TAGS} tags, not {len(names)}")
    return names


def _user(user):
    return user if user is not None and getattr(user, "is_authenticated", False) else None


# --- runs and regressions ----------------------------------------------------------------

RESULT_STATUSES = tuple(EvalResult.Status.values)


def run_record(
    *,
    project: Project,
    label: str,
    started_at: datetime,
    finished_at: datetime,
    results: list[dict[str, Any]],
    git_sha: str = "",
    user=None,
    now: datetime | None = None,
) -> EvalRun:
    """Record a run posted by the runner (docs/contract/eval-cases.md#runner--server-rest-contract)
    and flag and alert its regressions.

    Each result names a case of this project, one of that case's **pinned** versions and
    its content hash (a mismatch means the runner ran something else than the server
    holds); a case appears at most once. A result is a regression when the case's previous
    result (the latest earlier run with that case, by start time) passed and this one
    failed or errored. Regressions open (or refresh) one `eval_regression` alert per tool
    through the project's channels; a tool whose cases all pass again has its alert resolved.
    """
    now = now or timezone.now()
    if not str(label or "").strip():
        raise EvalError("label", "must not be empty")
    if finished_at < started_at:
        raise EvalError("finished_at", "is before started_at")
    case_ids = [_result_int(result, index, "case_id", low=1, high=MAX_ID) for index, result in enumerate(results)]
    cases = {
        case.id: case
        for case in EvalCase.objects.filter(project=project, id__in=case_ids).annotate(
            previous_status=Subquery(
                EvalResult.objects.filter(case=OuterRef("pk"), run__started_at__lte=started_at)
                .order_by("-run__started_at", "-run_id")
                .values("status")[:1]
            )
        )
    }
    versions = {
        (version.case_id, version.number): version for version in EvalCaseVersion.objects.filter(case_id__in=cases)
    }
    rows: list[EvalResult] = []
    seen: set[int] = set()
    for index, (result, case_id) in enumerate(zip(results, case_ids, strict=True)):
        at = f"results[{index}]"
        case = cases.get(case_id)
        if case is None:
            raise EvalError(f"{at}.case_id", f"no eval case {case_id} in project {project.slug}")
        if case_id in seen:
            raise EvalError(f"{at}.case_id", f"case {case_id} appears twice in this run")
        seen.add(case_id)
        number = _result_int(result, index, "version", low=1, high=MAX_POSITIVE_INT)
        version = versions.get((case_id, number))
        if version is None:
            raise EvalError(f"{at}.version", f"case {case_id} has no version {number}")
        if not version.is_pinned:
            raise EvalError(f"{at}.version", f"version {number} of case {case_id} is a draft; only pinned versions run")
        if result.get("content_hash") != version.content_hash:
            raise EvalError(
                f"{at}.content_hash",
                f"{result.get('content_hash')!r} is not the hash of case {case_id} v{number} ({version.content_hash})",
            )
        status = result.get("status")
        if status not in RESULT_STATUSES:
            raise EvalError(f"{at}.status", f"must be one of {', '.join(RESULT_STATUSES)}, not {status!r}")
        reasons = result.get("reasons") or []
        if not isinstance(reasons, list) or not all(isinstance(reason, str) for reason in reasons):
            raise EvalError(f"{at}.reasons", "must be a list of strings")
        _no_nul(f"{at}.reasons", reasons)
        observed = result.get("observed")
        if observed is not None and not isinstance(observed, dict):
            raise EvalError(f"{at}.observed", "must be an object or null")
        _no_nul(f"{at}.observed", observed)
        duration = result.get("duration_ms")
        number_ms = not isinstance(duration, bool) and isinstance(duration, int | float)
        if duration is not None and not (number_ms and 0 <= duration < MAX_POSITIVE_INT + 0.5):  # as round() stores it
            message = f"must be milliseconds from 0 to {MAX_POSITIVE_INT} or null, not {duration!r}"
            raise EvalError(f"{at}.duration_ms", message)
        rows.append(
            EvalResult(
                case=case,
                version=version,
                status=status,
                reasons=reasons,
                observed=_json_ready(observed) if observed is not None else None,
                duration_ms=round(duration) if duration is not None else None,
                regression=case.previous_status == EvalResult.Status.PASSED and status != EvalResult.Status.PASSED,
            )
        )

    with transaction.atomic():
        run = EvalRun.objects.create(
            project=project,
            label=str(label).strip()[:200],
            git_sha=(git_sha or "")[:64],
            started_at=started_at,
            finished_at=finished_at,
            created_at=now,
            created_by=_user(user),
            passed=sum(row.status == EvalResult.Status.PASSED for row in rows),
            failed=sum(row.status == EvalResult.Status.FAILED for row in rows),
            errors=sum(row.status == EvalResult.Status.ERROR for row in rows),
            regressions=sum(row.regression for row in rows),
        )
        for row in rows:
            row.run = run
        EvalResult.objects.bulk_create(rows)
        _alert_regressions(project=project, run=run, rows=rows, now=now)
    return run


def _result_int(result: Any, index: int, name: str, *, low: int, high: int) -> int:
    if not isinstance(result, dict):
        raise EvalError(f"results[{index}]", "must be an object")
    value = result.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise EvalError(f"results[{index}].{name}", f"must be an integer, not {value!r}")
    if not low <= value <= high:  # beyond what its column holds: an overflow on SQLite, a DataError on PostgreSQL
        raise EvalError(f"results[{index}].{name}", f"must be an integer from {low} to {high}, not {value}")
    return value


def _alert_regressions(*, project: Project, run: EvalRun, rows: list[EvalResult], now: datetime) -> None:
    """Tell the alerting side which tools regressed and which pass again (evals.signals)."""
    by_tool: dict[str, list[EvalResult]] = defaultdict(list)
    for row in rows:
        by_tool[row.case.tool].append(row)
    findings = []
    for tool, tool_rows in sorted(by_tool.items()):
        regressed = [row for row in tool_rows if row.regression]
        if regressed:
            findings.append(RegressionFinding(tool, True, _regression_evidence(run, regressed),
                                              _regression_summary(run, tool, regressed)))  # fmt: skip
        elif all(row.status == EvalResult.Status.PASSED for row in tool_rows):
            # Still failing without a new regression leaves the alert open; all passing again resolves it.
            findings.append(RegressionFinding(tool, False))
    run_judged.send(sender=EvalRun, project=project, run=run, findings=findings, now=now)


def _regression_evidence(run: EvalRun, regressed: list[EvalResult]) -> dict:
    return {
        "run_id": run.id,
        "run_label": run.label,
        "git_sha": run.git_sha,
        "cases": [
            {
                "case_id": row.case_id,
                "version": row.version.number,
                "title": row.case.title,
                "status": row.status,
                "reasons": [reason[:500] for reason in row.reasons[:5]],
            }
            for row in regressed[:20]
        ],
    }


def _regression_summary(run: EvalRun, tool: str, regressed: list[EvalResult]) -> str:
    cases = ", ".join(f"#{row.case_id}" for row in regressed[:10]) + ("…" if len(regressed) > 10 else "")
    noun = "case" if len(regressed) == 1 else "cases"
    return f"{len(regressed)} eval {noun} of {tool} regressed in run {run.label}: {cases} passed before, not now."
