"""The recovery policies a replay compares (docs/replay.md#the-policies). Pure: stdlib and ingest.taxonomy.

A policy is a function of a logical call's first failure (`Failure`) deciding the controller's
next move (`Move`): stop, retry unchanged, or repair (call again with changed arguments).
The seed benchmark's three controllers (docs/contract/seed-benchmark.md#strategies):

- `retry_every_failure`: the generic message; the controller cannot tell failures apart and
  retries each once, unchanged.
- `route_by_class`: the error code; transient is retried, validation repaired, the permanent
  classes stop.
- `route_by_class_with_field`: the actionable envelope; the same routing, and the repair is
  guided by the named field and a suggestion.

`observed` is what the project's controller actually did after the failure (read from the
call's second attempt), and `as_sent` what a class-routing controller can do with the error
contract as the tool sends it now (the baseline of the contract fixes, dashboard/replay/fixes.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ingest import taxonomy

# Classes no retry can fix (dashboard/rollups/attempts.py PERMANENT_CLASSES, the same set; kept
# here so this module stays importable without the rollups).
PERMANENT_CLASSES = frozenset({"permission", "not_found", "business", "user_input", "fatal"})

STOP, RETRY, REPAIR = "stop", "retry", "repair"


@dataclass(frozen=True, slots=True)
class Move:
    kind: str  # STOP, RETRY or REPAIR
    # REPAIR: guided by a named field and a suggestion; RETRY: told how long to wait (retry_after).
    hinted: bool = False


STOPPED = Move(STOP)


@dataclass(frozen=True, slots=True)
class Failure:
    """A logical call's first failed attempt, as a controller could have seen it, and what followed."""

    tool: str
    error_class: str  # Toolwatch's class ("unknown" when none)
    explicit_class: bool = False  # the tool stated a class or code (contract check explicit_class)
    retryable_stated: bool = False  # the tool stated whether a retry can succeed (explicit_retryable)
    field_named: bool = False  # a validation error named its field (field_named)
    suggestion: bool = False  # ... and suggested the repair (suggestion)
    retry_after: bool = False  # a transient error said how long to wait (retry_after)
    observed: Move = STOPPED  # what the controller did next (the call's second attempt, if any)

    @property
    def permanent(self) -> bool:
        return self.error_class in PERMANENT_CLASSES

    @property
    def guided(self) -> bool:
        return self.field_named and self.suggestion


Policy = Callable[[Failure], Move]


def _retry(failure: Failure) -> Move:
    return Move(RETRY, hinted=failure.retry_after)


def retry_every_failure(failure: Failure) -> Move:
    """The generic message: every failure is retried once, unchanged."""
    return _retry(failure)


def _route(failure: Failure, *, guided: bool) -> Move:
    cls = failure.error_class
    if cls == taxonomy.VALIDATION:
        return Move(REPAIR, hinted=guided)
    if cls in PERMANENT_CLASSES:
        return STOPPED
    # transient; and unknown, which no routing can place: retried once, as a controller that cannot tell would.
    return _retry(failure)


def route_by_class(failure: Failure) -> Move:
    """The error code: retry transient, repair validation (unguided), stop on the permanent classes."""
    return _route(failure, guided=False)


def route_by_class_with_field(failure: Failure) -> Move:
    """The actionable envelope: the same routing, the repair guided by the field and the suggestion."""
    return _route(failure, guided=True)


def observed(failure: Failure) -> Move:
    """What the project's controller did after this failure."""
    return failure.observed


def as_sent(failure: Failure) -> Move:
    """A class-routing controller given the error contract as the tool sends it now.

    A stated class routes (the repair guided when the failure names a field and suggests a
    fix); without one, a stated retryable flag still separates retry from stop (the flag read
    as the class's own: the check retryable_consistent says when tools contradict it); with
    neither, the controller retries blindly, as under the generic message.
    """
    if failure.explicit_class:
        return _route(failure, guided=failure.guided)
    if failure.retryable_stated:
        retryable = taxonomy.CLASSES.get(failure.error_class, taxonomy.CLASSES[taxonomy.UNKNOWN]).retryable
        return _retry(failure) if retryable is not False else STOPPED
    return _retry(failure)


def with_contract(failure: Failure, **checks: bool) -> Failure:
    """The failure as it would be sent with some contract checks passing (a fix applied)."""
    return replace(failure, **checks)


# The policies a replay reports, in display order: key -> (label, function).
POLICIES: dict[str, tuple[str, Policy]] = {
    "observed": ("observed behaviour", observed),
    "retry_every_failure": ("retry every failure once (generic message)", retry_every_failure),
    "route_by_class": ("route by class (error code)", route_by_class),
    "route_by_class_with_field": ("route by class, with field and suggestion (actionable envelope)", route_by_class_with_field),
}  # fmt: skip
# The seed benchmark's strategy each seed policy stands for (docs/contract/seed-benchmark.md).
SEED_STRATEGIES = {"retry_every_failure": "generic", "route_by_class": "code", "route_by_class_with_field": "envelope"}
