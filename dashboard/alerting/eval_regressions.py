"""Eval runs' regressions become alerts: the receiver of evals.signals.run_judged.

One `eval_regression` alert per (project, tool), through the same lifecycle and channels as
drift (dashboard/alerting/lifecycle.py). Connected when the dashboard app is ready, so evals
records runs without importing the alerting side.
"""

from __future__ import annotations

from datetime import datetime

from django.dispatch import receiver

from dashboard.alerting.lifecycle import alert_apply_finding
from dashboard.models import Alert
from evals.signals import RegressionFinding, run_judged
from ingest.models import Project

KIND = "eval_regression"


@receiver(run_judged, dispatch_uid="dashboard.alerting.eval_regressions")
def alert_regressions(*, project: Project, findings: list[RegressionFinding], now: datetime, **_) -> None:
    tools = [finding.tool for finding in findings]
    open_tools = set(
        Alert.objects.filter(project=project, kind=KIND, tool__in=tools, status__in=Alert.OPEN_STATUSES)
        .values_list("tool", flat=True)
    )  # fmt: skip
    for finding in findings:
        if finding.firing or finding.tool in open_tools:  # nothing to resolve where none is open
            alert_apply_finding(project=project, tool=finding.tool, kind=KIND, firing=finding.firing,
                                evidence=finding.evidence, summary=finding.summary, now=now)  # fmt: skip
