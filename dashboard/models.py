"""Derived data: rollups of tool calls per time bucket. Recomputed, never incremented."""

from __future__ import annotations

from django.db import models

from ingest.models import Project

ERROR_CLASSES = ("transient", "validation", "permission", "not_found", "business", "user_input", "fatal", "unknown")


class ToolRollup(models.Model):
    """SPEC 5 counts of the logical calls that started in one bucket, per tool and dimension.

    Two resolutions: 5-minute buckets for short ranges and hours for long ones; a day or
    a range is the sum of its buckets. Rates are derived from these counts on read.
    """

    class Resolution(models.IntegerChoices):
        FIVE_MINUTES = 300
        HOUR = 3600

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    resolution = models.IntegerField(choices=Resolution.choices)
    bucket_start = models.DateTimeField()
    tool = models.CharField(max_length=256)
    service = models.CharField(max_length=256)
    environment = models.CharField(max_length=256, blank=True, default="")
    agent = models.CharField(max_length=256, blank=True, default="")

    calls = models.IntegerField(default=0)
    attempts = models.IntegerField(default=0)
    retries = models.IntegerField(default=0)
    failed_retries = models.IntegerField(default=0)
    wasted_retries = models.IntegerField(default=0)
    blind_retries = models.IntegerField(default=0)
    errors = models.IntegerField(default=0)
    resolved = models.IntegerField(default=0)
    escalations = models.IntegerField(default=0)
    err_transient = models.IntegerField(default=0)
    err_validation = models.IntegerField(default=0)
    err_permission = models.IntegerField(default=0)
    err_not_found = models.IntegerField(default=0)
    err_business = models.IntegerField(default=0)
    err_user_input = models.IntegerField(default=0)
    err_fatal = models.IntegerField(default=0)
    err_unknown = models.IntegerField(default=0)
    # Latency of every attempt: {bin: count}, see dashboard.histograms.
    latency_hist = models.JSONField(default=dict)
    # Contract quality of failed calls: {check: [passed, applicable]}.
    contract = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "resolution", "bucket_start", "tool", "service", "environment", "agent"],
                name="toolrollup_unique",
            )
        ]
        indexes = [
            models.Index(fields=["project", "resolution", "bucket_start"], name="toolrollup_range"),
            models.Index(fields=["project", "resolution", "tool", "bucket_start"], name="toolrollup_tool_range"),
        ]
