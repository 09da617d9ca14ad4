"""Ground truth: what the generator meant, counted the docs/contract/metrics.md way, to compare with Toolwatch.

The generator knows every logical call it made (its attempts, each attempt's outcome
and intended class, whether a retry kept the arguments) without reading a span back,
so these counts are an independent answer to "what should the rollups say". Field
names match `dashboard.models.ToolRollup` (and `dashboard.selectors.COUNT_FIELDS`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

# Classes no retry can fix (docs/contract/attempts.md#failed-wasted-and-blind-retries).
PERMANENT_CLASSES = frozenset({"permission", "not_found", "business", "user_input", "fatal"})
ERROR_CLASSES = ("transient", "validation", "permission", "not_found", "business", "user_input", "fatal", "unknown")
COUNTS = ("calls", "attempts", "retries", "failed_retries", "wasted_retries", "blind_retries", "errors", "resolved", "escalations")


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    ok: bool
    error_class: str = ""  # the intended class of a failure
    same_arguments: bool = True  # as the attempt before (a retry); True for a first attempt


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """One logical call as the generator made it."""

    tool: str
    service: str
    environment: str
    agent: str
    start_ns: int  # its first attempt's start
    attempts: tuple[AttemptOutcome, ...]
    escalated: bool


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One failed attempt and the verdict its evidence should get (for tests)."""

    trace_id: str
    span_id: str
    tool: str
    evidence: str
    error_class: str
    classified_by: str


@dataclass
class Counts:
    calls: int = 0
    attempts: int = 0
    retries: int = 0
    failed_retries: int = 0
    wasted_retries: int = 0
    blind_retries: int = 0
    errors: int = 0
    resolved: int = 0
    escalations: int = 0
    errors_by_class: Counter = field(default_factory=Counter)

    def add_call(self, call: CallOutcome) -> None:
        attempts = call.attempts
        self.calls += 1
        self.attempts += len(attempts)
        self.retries += len(attempts) - 1
        self.failed_retries += sum(1 for a in attempts[1:] if not a.ok)
        self.wasted_retries += sum(1 for a in attempts[:-1] if not a.ok and a.error_class in PERMANENT_CLASSES)
        self.blind_retries += sum(
            1 for before, after in zip(attempts, attempts[1:])
            if not before.ok and before.error_class == "validation" and after.same_arguments
        )  # fmt: skip
        if attempts[-1].ok:
            self.resolved += 1
        else:
            self.errors += 1
            self.errors_by_class[attempts[-1].error_class] += 1
        self.escalations += call.escalated

    def merge(self, other: Counts) -> None:
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.errors_by_class.update(other.errors_by_class)

    def as_dict(self) -> dict[str, int]:
        """The counts as rollup fields: calls, ..., err_transient, ..., err_unknown."""
        return {
            **{name: getattr(self, name) for name in COUNTS},
            **{f"err_{cls}": self.errors_by_class.get(cls, 0) for cls in ERROR_CLASSES},
        }

    @property
    def resolution_rate(self) -> float | None:
        return self.resolved / self.calls if self.calls else None

    @property
    def attempts_per_call(self) -> float | None:
        return self.attempts / self.calls if self.calls else None


class GroundTruth:
    """Counts per (tool, service, environment, agent), and optionally a ledger of failures."""

    def __init__(self, *, ledger: bool = False):
        self.cells: dict[tuple[str, str, str, str], Counts] = defaultdict(Counts)
        self.ledger: list[LedgerEntry] | None = [] if ledger else None
        self.first_ns: int | None = None
        self.last_ns: int | None = None

    def add(self, call: CallOutcome) -> None:
        self.cells[(call.tool, call.service, call.environment, call.agent)].add_call(call)
        self.first_ns = call.start_ns if self.first_ns is None else min(self.first_ns, call.start_ns)
        self.last_ns = call.start_ns if self.last_ns is None else max(self.last_ns, call.start_ns)

    def total(self, *, tool: str = "", service: str = "", environment: str = "", agent: str = "") -> Counts:
        """The counts of every cell matching the filters ("" matches all)."""
        out = Counts()
        wanted = (tool, service, environment, agent)
        for key, counts in self.cells.items():
            if all(not want or want == have for want, have in zip(wanted, key)):
                out.merge(counts)
        return out

    def by(self, dimension: str) -> dict[str, Counts]:
        """Counts per tool, service, environment or agent."""
        index = ("tool", "service", "environment", "agent").index(dimension)
        out: dict[str, Counts] = defaultdict(Counts)
        for key, counts in self.cells.items():
            out[key[index]].merge(counts)
        return dict(sorted(out.items()))
