"""The policy replay pages (docs/replay.md): per project and per tool. Parse the URL, call run_replay, render."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

from dashboard.models import ReplayResult
from dashboard.replay.estimate import ASSUMED
from dashboard.replay.service import run_replay
from dashboard.selectors.tools import dimension_choices
from dashboard.views.common import page_scope

SOURCE_LABELS = {"observed": "observed", "data": "from your data", "assumed": "assumed", "mixed": "mixed"}
ESTIMATE_SOURCES = {"tool": "this tool's data", "project": "the project's data (all tools)", ASSUMED: "assumed (seed)"}
# figure -> (label, how to show a value, how to show a change)
COLUMNS = {
    "resolution_rate": ("Resolution", lambda v: f"{v:.1%}", lambda v: f"{v * 100:+.1f} pts"),
    "attempts_per_call": ("Attempts per call", lambda v: f"{v:.3f}", lambda v: f"{v:+.3f}"),
    "failed_retries": ("Failed retries", lambda v: f"{round(v):,}", lambda v: f"{round(v):+,}"),
    "wasted_retries": ("Wasted retries", lambda v: f"{round(v):,}", lambda v: f"{round(v):+,}"),
}


def _cell(figure: dict, show, change) -> dict:
    exact = abs(figure["high"] - figure["low"]) < 1e-9
    source = SOURCE_LABELS[figure["source"]]
    if figure["source"] == "mixed" and figure.get("from_data") is not None:
        source = f"{figure['from_data']:.0%} from your data"
    return {
        "value": show(figure["value"]),
        "interval": "" if exact else f"{show(figure['low'])} – {show(figure['high'])}",
        "source": source,
        "delta": change(figure["delta"]) if figure["source"] != "observed" else "",
        "delta_interval": "" if exact or figure["source"] == "observed"
        else f"{change(figure['delta_low'])} to {change(figure['delta_high'])}",
    }  # fmt: skip


def policy_rows(result: dict) -> list[dict]:
    """One row per policy: its label and a cell per figure (value, interval, source, change)."""
    rows = []
    for key, figures in result["policies"].items():
        cells = [_cell(figures[name], show, change) for name, (_, show, change) in COLUMNS.items()]
        rows.append({"key": key, "label": result["labels"][key], "cells": cells})
    return rows


def fix_rows(fixes: list[dict]) -> list[dict]:
    rows = []
    for fix in fixes:
        week = fix["per_week"]
        effects = []
        if round(week["resolved"]):
            effects.append(f"{fix['resolution_rate'] * 100:+.1f} pts resolution ({round(week['resolved']):+,} calls a week)")
        if round(week["failed_retries"]):
            effects.append(f"{round(week['failed_retries']):+,} failed retries a week")
        if round(week["wasted_retries"]):
            effects.append(f"{round(week['wasted_retries']):+,} wasted retries a week")
        if round(week["retries"]) and not effects:
            effects.append(f"{round(week['retries']):+,} retries a week")
        rows.append({**fix, "effects": "; ".join(effects) or "a change of less than one call a week"})
    return rows


def _render(request, project: str, tool: str):
    scope = page_scope(request, project)
    time_range, filters = scope.time_range, scope.filters
    row = run_replay(scope.project, time_range.start, time_range.end, tool=tool, filters=filters)
    result = row.result if row.status == ReplayResult.Status.DONE else None
    return render(
        request,
        "dashboard/replay.html",
        scope.context(
            title=f"Replay · {tool}" if tool else "Replay",
            tool=tool,
            job=row,
            pending=row.status in (ReplayResult.Status.QUEUED, ReplayResult.Status.RUNNING),
            result=result,
            columns=[label for label, _, _ in COLUMNS.values()],
            policies=policy_rows(result) if result else [],
            tool_rows=[
                {"tool": entry["tool"], "calls": entry["calls"], "cells": policy_rows({**result, **entry})}
                for entry in result.get("tools", [])
            ] if result else [],  # fmt: skip
            fixes=fix_rows(result["fixes"]) if result else [],
            estimates=[{**e, "source_label": ESTIMATE_SOURCES.get(e["source"], e["source"])} for e in result["estimates"]]
            if result else [],  # fmt: skip
            dimensions=dimension_choices(scope.project, start=time_range.start, end=time_range.end, selected=filters),
        ),
    )


@login_required
def replay(request, project):
    return _render(request, project, "")


@login_required
def replay_tool(request, project, tool):
    return _render(request, project, tool)


urlpatterns = [
    path("p/<slug:project>/replay/", replay, name="replay"),
    path("p/<slug:project>/replay/tools/<path:tool>/", replay_tool, name="replay-tool"),
]
