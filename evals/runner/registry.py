"""The user's tools: `module:ATTR`, a mapping of tool names to callables (sync or async)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class RegistryError(Exception):
    """The `--tools` spec cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class Registry:
    spec: str  # "module:ATTR", as given
    tools: Mapping[str, Callable[..., Any]]

    def get(self, name: str) -> Callable[..., Any] | None:
        return self.tools.get(name)

    def missing(self, name: str) -> str:
        """The reason a case whose tool is not here cannot run."""
        return f"no tool named {name!r} in {self.spec} (have: {', '.join(sorted(self.tools)) or 'none'})"


def load_registry(spec: str) -> Registry:
    """Import `module:ATTR` (ATTR may be dotted) and check that it maps names to callables.

    The current directory is importable, as it is for `python -m`, so `--tools
    my_agent.tools:TOOLS` works from a checkout under a console script or pytest too.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise RegistryError(f"--tools must look like module:ATTR (e.g. my_agent.tools:TOOLS), not {spec!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # whatever the module raises on import, the user must see it
        raise RegistryError(f"cannot import {module_name!r} for --tools {spec}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise RegistryError(f"{module_name} has no attribute {attr!r} (--tools {spec})") from None
    if not isinstance(target, Mapping):
        raise RegistryError(f"{spec} must be a mapping of tool names to callables, not {type(target).__name__}")
    bad = [repr(name) for name, fn in target.items() if not (isinstance(name, str) and callable(fn))]
    if bad:
        raise RegistryError(f"{spec}: these entries are not a tool name mapped to a callable: {', '.join(bad)}")
    return Registry(spec, dict(target))
