"""Eval cases (docs/contract/eval-cases.md): a promoted failure, its versions, its frozen trace snapshot, and runs.

A case is promoted once per failed tool call (project, trace_id, span_id). What it expects
lives on its versions: the latest version is a draft until it is pinned; a pinned version
never changes (its content hash is over tool, arguments, expectation and timeout), and
editing a pinned case starts version n+1. Runs posted by the runner record the version each
result ran, and whether the result is a regression (passed last time, not now).

The snapshot rows copy the trace's spans and tool-call rows into this app's own table, so a
case outlives the retention that drops raw spans.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from ingest.models import Project


class EvalCase(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"  # never pinned
        PINNED = "pinned"  # has a pinned version (maybe with a newer draft)
        RETIRED = "retired"  # excluded from export, kept with its history

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="eval_cases")
    title = models.CharField(max_length=200)
    tool = models.CharField(max_length=256)
    # The failure it was promoted from: one case per failure.
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    # The observed outcome as the tool-call row had it (the export's `observed`, minus ids and time).
    observed = models.JSONField(default=dict)
    error_class = models.CharField(max_length=16, blank=True, default="")
    message = models.TextField(blank=True, default="")
    fingerprint = models.CharField(max_length=16, blank=True, default="")
    observed_at = models.DateTimeField()
    # Numbers of the latest version and of the latest pinned one (None: never pinned).
    latest_version = models.PositiveIntegerField(default=1)
    pinned_version = models.PositiveIntegerField(null=True, blank=True)
    # When it was first pinned: recurrence counts the failure coming back after this.
    pinned_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "trace_id", "span_id"], name="evalcase_one_per_failure"),
        ]
        indexes = [models.Index(fields=["project", "tool"], name="evalcase_project_tool")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.title}"

    @property
    def status(self) -> str:
        if self.retired_at is not None:
            return self.Status.RETIRED
        return self.Status.PINNED if self.pinned_version is not None else self.Status.DRAFT

    @property
    def has_draft(self) -> bool:
        return self.pinned_version != self.latest_version


class EvalCaseTag(models.Model):
    # A table rather than a JSON list: "cases tagged x" must be a plain indexed filter on
    # SQLite too, which has no JSON containment lookup.
    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=64)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["case", "name"], name="evalcasetag_unique")]
        indexes = [models.Index(fields=["name"], name="evalcasetag_name")]

    def __str__(self) -> str:
        return self.name


class EvalCaseVersion(models.Model):
    """What a case runs and expects. Editable while `pinned_at` is None; frozen after."""

    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    arguments = models.JSONField(null=True, blank=True)
    expect = models.JSONField(default=dict)
    timeout_s = models.PositiveIntegerField(default=30)
    content_hash = models.CharField(max_length=80, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pinned_at = models.DateTimeField(null=True, blank=True)
    pinned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["case", "number"], name="evalcaseversion_unique")]

    def __str__(self) -> str:
        return f"case {self.case_id} v{self.number}"

    @property
    def is_pinned(self) -> bool:
        return self.pinned_at is not None


class SnapshotSpan(models.Model):
    """One span of the trace a case was promoted from, frozen at promotion."""

    class Role(models.TextChoices):
        TOOL = "tool"  # the promoted call itself
        ANCESTOR = "ancestor"
        SIBLING = "sibling"  # same parent as the tool span
        DESCENDANT = "descendant"  # below the tool span (its HTTP call, say)

    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="snapshot")
    position = models.PositiveIntegerField()  # tree order: parents before children, by start time
    depth = models.PositiveIntegerField(default=0)
    role = models.CharField(max_length=16, choices=Role.choices)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True, default="")
    name = models.TextField()
    kind = models.SmallIntegerField(default=0)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField()
    status_code = models.SmallIntegerField(default=0)
    status_message = models.TextField(blank=True, default="")
    service = models.CharField(max_length=256, blank=True, default="")
    environment = models.CharField(max_length=256, blank=True, default="")
    agent = models.CharField(max_length=256, blank=True, default="")
    attributes = models.JSONField(default=dict)
    resource_attributes = models.JSONField(default=dict)
    events = models.JSONField(default=list)
    # The span's tool-call row (ingest.ToolCall fields) when it is a tool span.
    tool_call = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["case", "position"], name="snapshotspan_unique")]

    @property
    def duration_ms(self) -> float:
        return (self.end_time - self.start_time).total_seconds() * 1000


class EvalRun(models.Model):
    """One run of the cases, posted by the runner (CI or a laptop)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="eval_runs")
    label = models.CharField(max_length=200)
    git_sha = models.CharField(max_length=64, blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0)
    regressions = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["project", "-started_at"], name="evalrun_project_recent")]

    def __str__(self) -> str:
        return f"run {self.pk} {self.label}"

    @property
    def duration_s(self) -> float:
        return max((self.finished_at - self.started_at).total_seconds(), 0.0)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors


class EvalResult(models.Model):
    class Status(models.TextChoices):
        PASSED = "passed"
        FAILED = "failed"
        ERROR = "error"  # the runner could not judge (unknown tool, timeout, crash)

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(EvalCase, on_delete=models.CASCADE, related_name="results")
    version = models.ForeignKey(EvalCaseVersion, on_delete=models.CASCADE, related_name="results")
    status = models.CharField(max_length=16, choices=Status.choices)
    reasons = models.JSONField(default=list, blank=True)
    observed = models.JSONField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # The case's previous result (latest earlier run with it) passed, and this one did not.
    regression = models.BooleanField(default=False)

    class Meta:
        ordering = ["run_id", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "case"], name="evalresult_one_per_case")]
        indexes = [models.Index(fields=["case", "run"], name="evalresult_case_run")]

    def __str__(self) -> str:
        return f"{self.case_id} {self.status}"
