"""A replay's result, as stored and served (docs/replay.md#reading-the-result). Pure.

From the summarised traffic of every tool of the range (dashboard/replay/traffic.py): the
estimates from the whole project's evidence (so a tool with little evidence borrows the
project's before the seed's assumptions), then for the project or one tool the figures of each
policy against the observed, the ranked contract fixes, and the estimates that were used.
Plain JSON types only: it is stored in ReplayResult.result.
"""

from __future__ import annotations

from collections.abc import Callable

from dashboard.replay.estimate import Estimates, pooled
from dashboard.replay.fixes import rank_fixes, rank_key
from dashboard.replay.policies import POLICIES
from dashboard.replay.simulate import replay_traffic
from dashboard.replay.traffic import ToolTraffic, combined

# Bump when the result's shape or method changes: cached results of another version are recomputed.
VERSION = 1


def build_report(
    tools: dict[str, ToolTraffic],
    *,
    tool: str = "",
    policies: tuple[str, ...] = tuple(POLICIES),
    range_seconds: float,
    progress: Callable[[int], None] | None = None,
) -> dict:
    """The replay of the project (tool "") or of one tool, for the given policies."""
    project = combined(tools)
    estimates = Estimates(project.evidence)
    if "observed" not in policies:  # the change is always against the observed
        policies = ("observed", *policies)
    names = [tool] if tool else sorted(tools)
    selected = tools.get(tool, ToolTraffic()) if tool else project
    per_tool, fixes = [], []
    for index, name in enumerate(names):
        traffic = tools.get(name, ToolTraffic())
        fixes.extend(rank_fixes(name, traffic, estimates, range_seconds=range_seconds))
        if not tool:
            per_tool.append({"tool": name, "calls": traffic.calls, "policies": replay_traffic(traffic, estimates, policies)})
        if progress and len(names) > 1:
            progress(int(100 * (index + 1) / len(names)))
    fixes.sort(key=rank_key)
    result = {
        "version": VERSION,
        "tool": tool,
        "calls": selected.calls,
        "failed_first": sum(selected.failures.values()),
        "policies": replay_traffic(selected, estimates, policies),
        "labels": {key: POLICIES[key][0] for key in policies},
        "fixes": fixes,
        "estimates": [
            {"tool": key[0], "error_class": key[1], "move": key[2], "hinted": key[3], **estimate.as_dict()}
            for key, estimate in estimates.used()
            if not tool or key[0] == tool
        ],
        "evidence": pooled(selected.evidence),
        "range_seconds": range_seconds,
    }
    if not tool:
        result["tools"] = per_tool
    return result
