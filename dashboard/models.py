"""Derived data: rollups of tool calls per time bucket (recomputed, never incremented); alerts."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from ingest.models import Project


class RollupCounts(models.Model):
    """The counts (docs/contract/metrics.md#counts) of a bucket, shared by both rollup tables."""

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
    # Latency of every attempt: {bin: count}, see dashboard.rollups.histograms.
    latency_hist = models.JSONField(default=dict)
    # Contract quality of failed calls: {check: [passed, applicable]}.
    contract = models.JSONField(default=dict)

    class Meta:
        abstract = True


class ToolRollup(RollupCounts):
    """The counts (docs/contract/metrics.md) of the logical calls that started in one bucket, per tool and dimension.

    Three resolutions: 5-minute buckets for short ranges (kept for the last few days), hours,
    and days summed from the hours; a range is the sum of the buckets that tile it. Rates
    are derived from these counts on read.
    """

    class Resolution(models.IntegerChoices):
        FIVE_MINUTES = 300
        HOUR = 3600
        # Summed from the hourly rows: 30- and 90-day views read 24 times fewer rows.
        DAY = 86400

    # No database-level foreign key: checking it costs every rollup row written (a refresh
    # writes tens of thousands); deleting a project deletes its rollups through Django.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    resolution = models.IntegerField(choices=Resolution.choices)
    bucket_start = models.DateTimeField()
    tool = models.CharField(max_length=256)
    service = models.CharField(max_length=256)
    environment = models.CharField(max_length=256, blank=True, default="")
    agent = models.CharField(max_length=256, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "resolution", "bucket_start", "tool", "service", "environment", "agent"],
                name="toolrollup_unique",
            )
        ]
        # The unique index serves range scans (project, resolution, bucket_start); this one a tool's.
        indexes = [models.Index(fields=["project", "resolution", "tool", "bucket_start"], name="toolrollup_tool_range")]


class ToolRollupTotal(RollupCounts):
    """ToolRollup summed over service, environment and agent: one row per tool and bucket.

    Pages without a dimension filter (the default) read these instead of the dimensioned
    rows, which are ~hundreds of times more (one per service × environment × agent seen).
    Written by dashboard.rollups with the ToolRollup rows they sum, in the same transaction,
    and replaced over the same ranges, so the two always agree.
    """

    # No database-level foreign key: checking it costs every rollup row written (a refresh
    # writes tens of thousands); deleting a project deletes its rollups through Django.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    resolution = models.IntegerField(choices=ToolRollup.Resolution.choices)
    bucket_start = models.DateTimeField()
    tool = models.CharField(max_length=256)
    # The bucket's failed attempts by fingerprint, so the tool page's top fingerprints need not
    # group the raw calls: {fingerprint: [count, first seen, last seen (ISO), max class, max
    # message (first 256 characters)]}. Not in ToolRollup: the failures are not split by dimension.
    failures = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "resolution", "bucket_start", "tool"], name="toolrolluptotal_unique")
        ]
        # The unique index serves range scans (project, resolution, bucket_start); this one a tool's.
        indexes = [models.Index(fields=["project", "resolution", "tool", "bucket_start"], name="toolrolluptotal_tool_range")]


class RolledUpBucket(models.Model):
    """When a 5-minute bucket's rows were last computed (PostgreSQL's 5-minute path).

    A call counts in the bucket of its first attempt, so a retry arriving in a later bucket
    changes an earlier bucket's rows. When the later bucket is rolled up, the earlier one is
    recomputed only if one of those retries may have arrived after its rows were computed
    (dashboard.rollups.RECEIVED_MARGIN says how that is judged safely); most retries come
    seconds after their first attempt and were counted the first time."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    bucket_start = models.DateTimeField()
    # The refresh's clock when it began: every call received before it, less the margin, is in the rows.
    computed_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "bucket_start"], name="rolledupbucket_unique")]


# ---------------------------------------------------------------------------------------
# Alerts (docs/contract/drift-and-alerts.md): one open alert per (project, tool, kind), delivered to the project's
# channels. The lifecycle lives in dashboard.alerting.lifecycle, sending in dashboard.alerting.delivery.


def new_channel_secret() -> str:
    return secrets.token_urlsafe(32)


class AlertChannel(models.Model):
    """Where a project's alerts go. `target` is a URL (webhook, slack) or comma-separated emails.

    A channel whose delivery failed permanently (or ran out of retries) is marked with
    `failing_since`; it gets no more attempts until it is re-enabled or a test succeeds.
    """

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        SLACK = "slack"
        EMAIL = "email"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="alert_channels")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    name = models.CharField(max_length=200)
    # A Slack webhook URL is itself a credential: never log or display it in full.
    target = models.TextField()
    # Key of the webhook's HMAC-SHA256 signature (unused by the other kinds).
    secret = models.CharField(max_length=128, default=new_channel_secret)
    is_active = models.BooleanField(default=True)
    failing_since = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class Alert(models.Model):
    """A drift finding that fired: open → acknowledged → resolved (by hand or automatically)."""

    class Status(models.TextChoices):
        OPEN = "open"
        ACKNOWLEDGED = "acknowledged"
        RESOLVED = "resolved"

    OPEN_STATUSES = (Status.OPEN, Status.ACKNOWLEDGED)
    RESOLVED_AUTOMATICALLY = "auto"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="alerts")
    tool = models.CharField(max_length=256)
    kind = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    opened_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    # "auto" when the condition cleared, else the username of who resolved it.
    resolved_by = models.CharField(max_length=150, blank=True, default="")
    muted_until = models.DateTimeField(null=True, blank=True)
    summary = models.TextField(blank=True, default="")
    # The numbers, windows, test statistics and sample trace ids of the latest firing finding.
    evidence = models.JSONField(default=dict, blank=True)
    # The same for the evaluation that opened the alert: written once, never refreshed, so the
    # alert keeps saying why it opened (dashboard/alerting/explain.py makes its sentence).
    opening_evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            # No flood: at most one open (or acknowledged) alert per condition.
            models.UniqueConstraint(
                fields=["project", "tool", "kind"],
                condition=models.Q(status__in=["open", "acknowledged"]),
                name="alert_one_open_per_condition",
            )
        ]
        indexes = [models.Index(fields=["project", "-opened_at"], name="alert_project_recent")]

    def __str__(self) -> str:
        return f"{self.kind} on {self.tool} ({self.status})"

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    def is_muted(self, now) -> bool:
        return self.muted_until is not None and self.muted_until > now


class Delivery(models.Model):
    """One notification of one alert event to one channel, with its retry state."""

    class Event(models.TextChoices):
        OPENED = "opened"
        RESOLVED = "resolved"
        TEST = "test"

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        FAILED = "failed"
        SKIPPED = "skipped"

    # Null for a channel test, which belongs to no alert.
    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, null=True, blank=True, related_name="deliveries")
    channel = models.ForeignKey(AlertChannel, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=16, choices=Event.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    # When pending: the earliest next try. When sending: the end of the claim's lease.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    response_code = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]
        constraints = [
            # One notice per alert event and channel, whatever retries or second workers do
            # (dashboard/alerting/lifecycle.py checks it under the alert's row lock; this holds it).
            models.UniqueConstraint(
                fields=["alert", "channel", "event"], condition=models.Q(alert__isnull=False), name="delivery_once_per_event"
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} → {self.channel_id} ({self.status})"


class DeliveryAttempt(models.Model):
    """The log: one row per try of a delivery."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField()
    ok = models.BooleanField()
    error = models.TextField(blank=True, default="")
    response_code = models.IntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["at", "id"]


# --- Personal API tokens (REST API auth) ---------------------------------------------
# Appended here to leave the models above untouched; the import belongs at the top.

API_TOKEN_PREFIX = "twu_"
# What a personal token may do, in this order (dashboard/tokens.py says which endpoints each one opens).
API_TOKEN_SCOPES = ("read", "runs", "admin")


def validate_api_token_scopes(value) -> None:
    """A list of known scope names, each once, at least one."""
    if not isinstance(value, list) or not value or not all(isinstance(scope, str) for scope in value):
        raise ValidationError("Give at least one scope: %(scopes)s.", params={"scopes": ", ".join(API_TOKEN_SCOPES)})
    unknown = [scope for scope in value if scope not in API_TOKEN_SCOPES]
    if unknown or len(set(value)) != len(value):
        raise ValidationError(
            "Unknown or repeated scope %(bad)r; the scopes are %(scopes)s.",
            params={"bad": (unknown or value)[0], "scopes": ", ".join(API_TOKEN_SCOPES)},
        )


class ApiToken(models.Model):
    """A user's personal token for the REST API (`Authorization: Bearer twu_…`).

    Not the same thing as an `ingest.ApiKey` (`tw_…`), which only sends spans to one
    project. Only a sha256 of the token is stored; the plain token is shown once.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=32, help_text="The visible start of the token, to tell tokens apart.")
    hashed_token = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(
        default=list, validators=[validate_api_token_scopes],
        help_text="What the token may do: some of read, runs, admin. The user's role still applies on top.",
    )  # fmt: skip

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    def is_expired(self, now) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def is_active(self, now) -> bool:
        return self.revoked_at is None and not self.is_expired(now)


# --- Agent access log (MCP server and tool-health feed; issue 16 item 4) ----------------
# Appended at the end like the tokens above; written by dashboard/agent_access.py only.


class AgentAccess(models.Model):
    """One call by an agent surface (an MCP tool, the tool-health feed): who asked what, when.

    Shown to the project's owners. `arguments` is redacted and bounded before it is stored
    (dashboard/agent_access.py); rows past AGENT_ACCESS_KEEP_DAYS are pruned as new ones come.
    """

    class Surface(models.TextChoices):
        MCP = "mcp", "MCP"
        FEED = "feed", "tool-health feed"

    # Null when the call named no project the caller may see (an outsider's slug is logged, unowned).
    project = models.ForeignKey(Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    token = models.ForeignKey(ApiToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    surface = models.CharField(max_length=8, choices=Surface.choices)
    name = models.CharField(max_length=128, help_text="The MCP tool or the feed endpoint called.")
    arguments = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=32, help_text='"ok", or the error class of the answer.')
    duration_ms = models.PositiveIntegerField(default=0)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["project", "-at"], name="agentaccess_project_at")]

    def __str__(self) -> str:
        return f"{self.surface} {self.name} {self.outcome} at {self.at:%Y-%m-%d %H:%M:%S}"


# ---------------------------------------------------------------------------------------
# The tool-health feed (docs/contract/tool-health.md): one stored answer per project.


class ToolHealthSnapshot(models.Model):
    """A project's tool-health feed, computed from the rollups and open alerts (dashboard/feed/snapshot.py).

    Refreshed at the end of each rollup run of the project and when older than
    dashboard.feed.snapshot.STALE_AFTER; the API serves `payload` byte for byte with `etag`,
    so a poll is one indexed read and an unchanged one a 304.
    """

    project = models.OneToOneField(Project, on_delete=models.CASCADE, primary_key=True, related_name="+")
    payload = models.TextField(help_text="The feed's JSON document, as served.")
    etag = models.CharField(max_length=66, help_text="A strong ETag of the payload, quoted.")
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"tool health of project {self.project_id} at {self.computed_at:%Y-%m-%d %H:%M:%S}"


# --- Policy replay results (issue 17, docs/replay.md) --------------------------------------
# Appended at the end like the tables above; written by dashboard/replay/service.py only.


class ReplayResult(models.Model):
    """One policy replay of a project's range: cached, or a job with its progress (dashboard/replay/service.py).

    Keyed by project, tool ("" for the whole project), policy ("" for all four), the range and
    `params_hash` (the filters and the method's version). `fingerprint` is the rollups' state of
    the range when it was computed: a result whose range has changed since is computed again.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    tool = models.CharField(max_length=256, blank=True, default="")
    policy = models.CharField(max_length=32, blank=True, default="")
    start = models.DateTimeField()
    end = models.DateTimeField()
    params_hash = models.CharField(max_length=64)
    params = models.JSONField(default=dict, blank=True)
    fingerprint = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    computed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "tool", "policy", "start", "end", "params_hash"], name="replayresult_unique"
            )
        ]

    def __str__(self) -> str:
        return f"replay {self.project_id} {self.tool or '*'} {self.policy or '*'} {self.start:%Y-%m-%d %H:%M}… ({self.status})"
