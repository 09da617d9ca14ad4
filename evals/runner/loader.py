"""Read eval cases from the JSONL export (schema_version 1, docs/eval-case.schema.json).

A line that cannot be run (not JSON, a wrong `schema_version`, a missing or ill-typed
field, an invalid expectation, a content hash that does not match) becomes a `LoadProblem`
naming the line number and the problem; the other lines still load. Nothing here raises
on bad input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.expectations import ExpectationError, content_hash, validate

SCHEMA_VERSION = 1
REQUIRED = ("schema_version", "case_id", "version", "content_hash", "tool", "arguments", "expect", "timeout_s")
_HASH = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(slots=True)
class Case:
    """One pinned case version, ready to run."""

    line: int
    case_id: int
    version: int
    content_hash: str
    tool: str
    arguments: Any
    expect: dict[str, Any]
    timeout_s: float
    title: str = ""
    tags: list[str] = field(default_factory=list)
    project: str = ""

    @property
    def label(self) -> str:
        return f"case {self.case_id} v{self.version}"


@dataclass(slots=True)
class LoadProblem:
    """A line that could not become a `Case`, with what is known of it."""

    line: int
    problem: str
    source: str = ""
    case_id: int | None = None
    version: int | None = None
    content_hash: str = ""
    tool: str = ""
    # Only a problem whose case the server can still recognise is posted (as an `error`
    # result); a hash that does not match would make the server refuse the whole run.
    postable: bool = False

    @property
    def label(self) -> str:
        if self.case_id is not None and self.version is not None:
            return f"case {self.case_id} v{self.version}"
        return f"line {self.line}"

    @property
    def message(self) -> str:
        where = f"{self.source} line {self.line}" if self.source else f"line {self.line}"
        return f"{where}: {self.problem}"


def load_file(path: str | Path) -> list[Case | LoadProblem]:
    """The cases of a JSONL file (UTF-8); an unreadable file raises OSError."""
    path = Path(path)
    with path.open(encoding="utf-8", errors="replace") as lines:
        return parse_lines(lines, source=str(path))


def parse_text(text: str, *, source: str = "") -> list[Case | LoadProblem]:
    return parse_lines(text.splitlines(), source=source)


def parse_lines(lines: Iterable[str], *, source: str = "") -> list[Case | LoadProblem]:
    """One `Case` or `LoadProblem` per non-blank line, in order."""
    loaded: list[Case | LoadProblem] = []
    for number, text in enumerate(lines, start=1):
        if text.strip():
            loaded.append(parse_line(text, number, source=source))
    return loaded


def parse_line(text: str, number: int, *, source: str = "") -> Case | LoadProblem:
    try:
        data = json.loads(text)
    except ValueError as exc:
        return LoadProblem(number, f"not valid JSON ({exc})", source)
    if not isinstance(data, dict):
        return LoadProblem(number, "not a JSON object", source)

    problem = LoadProblem(number, "", source)
    if _is_positive_int(data.get("case_id")):
        problem.case_id = data["case_id"]
    if _is_positive_int(data.get("version")):
        problem.version = data["version"]
    if isinstance(data.get("tool"), str):
        problem.tool = data["tool"]
    if isinstance(data.get("content_hash"), str) and _HASH.fullmatch(data["content_hash"]):
        problem.content_hash = data["content_hash"]
    problem.postable = problem.case_id is not None and problem.version is not None and bool(problem.content_hash)

    missing = [name for name in REQUIRED if name not in data]
    if missing:
        return _fail(problem, f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    if data["schema_version"] != SCHEMA_VERSION:
        given = json.dumps(data["schema_version"])
        return _fail(problem, f"schema_version {given} is not supported (this runner reads {SCHEMA_VERSION})")
    for name in ("case_id", "version"):
        if not _is_positive_int(data[name]):
            return _fail(problem, f"{name} must be a positive integer, not {json.dumps(data[name])}")
    if not problem.content_hash:
        given = json.dumps(data["content_hash"])
        return _fail(problem, f"content_hash must be 'sha256:' and 64 hex digits, not {given}")
    if not (isinstance(data["tool"], str) and data["tool"].strip()):
        return _fail(problem, f"tool must be a non-empty string, not {json.dumps(data['tool'])}")
    timeout_s = data["timeout_s"]
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        return _fail(problem, f"timeout_s must be a positive number of seconds, not {json.dumps(timeout_s)}")
    try:
        expect = validate(data["expect"])
    except ExpectationError as exc:
        return _fail(problem, f"expect.{exc.field}: {exc.message}")
    computed = content_hash(data["tool"], data["arguments"], expect, timeout_s)
    if computed != data["content_hash"]:
        problem.postable = False
        return _fail(
            problem, f"content_hash does not match the case's content (computed {computed}): edited after export?"
        )
    tags = data.get("tags")
    return Case(
        line=number,
        case_id=data["case_id"],
        version=data["version"],
        content_hash=data["content_hash"],
        tool=data["tool"],
        arguments=data["arguments"],
        expect=expect,
        timeout_s=timeout_s,
        title=data["title"] if isinstance(data.get("title"), str) else "",
        tags=[t for t in tags if isinstance(t, str)] if isinstance(tags, list) else [],
        project=data["project"] if isinstance(data.get("project"), str) else "",
    )


def _fail(problem: LoadProblem, message: str) -> LoadProblem:
    problem.problem = message
    return problem


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
