"""What the evals app tells the rest of Toolwatch, without importing it.

`run_judged` is sent inside the transaction that records an eval run (evals.services.run_record),
once per run, with `project`, `run`, `now` and `findings`: one `RegressionFinding` per tool the
run touched that should open, refresh or resolve an `eval_regression` alert. The alerting
package (dashboard/alerting/eval_regressions.py) receives it; evals knows nothing of alerts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.dispatch import Signal

run_judged = Signal()


@dataclass(frozen=True)
class RegressionFinding:
    tool: str
    firing: bool  # True: cases of this tool regressed in the run; False: all its cases pass again
    evidence: dict = field(default_factory=dict)
    summary: str = ""
