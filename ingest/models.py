"""The write side: projects, their API keys, every span, its resource, and a tool-call row per tool span.

On PostgreSQL, `Span` and `ToolCall` are range-partitioned by day on `start_time`
(migration 0002, raw SQL beside it; partitions are managed by `ingest.partitions`).
Their uniqueness there is (project, trace_id, span_id, start_time): a partitioned
table's unique index must contain the partition key, and a replayed span keeps its
start time, so replays still dedupe. Their id columns have no index there (migration 0012):
nothing looks a span or a tool call up by id.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from ingest.json_text import dumps_json

API_KEY_PREFIX = "tw_"
API_KEY_VISIBLE_CHARS = 8


def default_retention_days() -> int:
    return settings.DEFAULT_RETENTION_DAYS


class Project(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    retention_days = models.PositiveIntegerField(default=default_retention_days)
    # Calls of these tools are hand-offs to a human (docs/contract/attempts.md), e.g. ["handoff_to_human"].
    escalation_tools = models.JSONField(default=list, blank=True)
    # Drift threshold overrides: {"*": {...} for every tool, "<tool>": {...}}; field names
    # and defaults in dashboard.drift.Thresholds and docs/drift.md.
    drift_thresholds = models.JSONField(default=dict, blank=True)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    # When the project's first OTLP log record was stored (None: never): pages skip reading log
    # records of a project that has none (services.logs_ingest sets it once).
    logs_since = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]


def hash_api_key(key: str) -> str:
    # Keys carry 256 random bits, so a fast hash is enough; no need for a password KDF.
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKey(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, default="default")
    prefix = models.CharField(max_length=32, help_text="The visible start of the key, to tell keys apart.")
    hashed_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Resource(models.Model):
    """The attributes of one OTel resource (the process or service that sent spans), stored
    once per project and referenced by its spans: a request's spans share a few resources,
    and a copy on every span cost a third of a span row.

    `last_seen` is renewed by ingest at most once per process per RESOURCE_TOUCH (see
    ingest.storage.resource_ids); retention deletes a resource only when it has not been
    seen for longer than its project's retention, so when its spans are gone too.
    """

    # No database-level foreign key, as on Span: deleting a project deletes its rows through Django.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    # ingest.records.resource_digest(attributes): blake2b-128 of their canonical JSON.
    digest = models.BinaryField(max_length=16)
    attributes = models.JSONField(default=dict)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "digest"], name="resource_unique_digest")]

    def __str__(self) -> str:
        return f"{self.attributes.get('service.name', 'unknown_service')} ({self.digest.hex()})"


class HexIdField(models.CharField):
    """A trace or span id (lower-case hex), compared byte by byte: on PostgreSQL its collation is "C".

    The unique and look-up indexes on (project, trace_id, span_id) compare ids on every insert
    (about twenty comparisons a row); under the database's own collation (en_US.UTF-8 in the
    usual image, C.UTF-8 here) each goes through strcoll(), under "C" through memcmp, which
    took ~2.8 µs off a row of such an index at ingest (docs/benchmarks.md, "Ingest at half the
    CPU"). Hex sorts the same either way. Comparing it with a column of the default collation
    is allowed (the result is "C"). SQLite compares bytes already (BINARY)."""

    def db_parameters(self, connection):
        params = super().db_parameters(connection)
        if connection.vendor == "postgresql":
            params["collation"] = "C"
        return params


class WholeJSONField(models.JSONField):
    """A JSONField kept as PostgreSQL `text` (the JSON's text, not checked again), not `jsonb`,
    for values written once and only ever read whole (a span's attributes, events and links: the
    trace page, eval snapshots, reclassification; a tool call's arguments and result), never
    looked into by a query. jsonb's conversion into its binary form cost PostgreSQL ~4 µs a span
    at ingest (docs/benchmarks.md, "Ingest at half the CPU"); `json` (0012 to 0013) still lexed the
    whole text to check it, ~10 % of PostgreSQL's CPU at ingest ("Session 10"). The text is
    always ingest.json_text's encoding (for COPY and the ORM alike), so there is nothing to check. Lookups into it
    (attributes__key) are not supported on PostgreSQL; SQL that needs its structure casts it
    (`attributes::jsonb`). SQLite stores JSONField as text anyway."""

    def db_type(self, connection):
        return "text" if connection.vendor == "postgresql" else super().db_type(connection)

    def get_db_prep_value(self, value, connection, prepared=False):
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        if not prepared:
            value = self.get_prep_value(value)
        # Text for a text column (Django's PostgreSQL adapter would send jsonb), encoded as ingest's COPY encodes it.
        return dumps_json(value).decode()

    def from_db_value(self, value, expression, connection):
        if value is not None and not isinstance(value, str):
            return value  # an expression decoded by psycopg already (a `::json` or `::jsonb` cast)
        return super().from_db_value(value, expression, connection)


class SpanQuerySet(models.QuerySet):
    def with_resource_attributes(self) -> SpanQuerySet:
        """Spans with `resource_attributes`: their resource's attributes (None if it is gone),
        read in the same query."""
        attributes = Resource.objects.filter(pk=models.OuterRef("resource_id")).values("attributes")[:1]
        return self.annotate(resource_attributes=models.Subquery(attributes, output_field=models.JSONField()))


class Span(models.Model):
    """Every span of every trace, as received (after redaction and truncation)."""

    # No database-level foreign key: checking it per row costs the hot write path ~3 µs a
    # span; ingest is the only writer, and deleting a project deletes its rows through Django.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    trace_id = HexIdField(max_length=32)
    span_id = HexIdField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True, default="")
    name = models.TextField()
    kind = models.SmallIntegerField(default=0)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField()
    status_code = models.SmallIntegerField(default=0)
    status_message = models.TextField(blank=True, default="")
    service = models.CharField(max_length=256, default="unknown_service")
    environment = models.CharField(max_length=256, blank=True, default="")
    service_version = models.CharField(max_length=256, blank=True, default="")
    scope_name = models.CharField(max_length=256, blank=True, default="")
    scope_version = models.CharField(max_length=256, blank=True, default="")
    # The agent this span itself names (gen_ai.agent.name), for resolving tool calls' agents.
    agent = models.CharField(max_length=256, blank=True, default="")
    attributes = WholeJSONField(default=dict)
    # Its resource's attributes, stored once (Span.objects.with_resource_attributes() reads
    # them). No database-level foreign key, as for project; no index: nothing looks spans up
    # by resource.
    resource = models.ForeignKey(
        Resource, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False, related_name="+"
    )
    events = WholeJSONField(default=list)
    links = WholeJSONField(default=list)
    trace_state = models.TextField(blank=True, default="")
    flags = models.BigIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)

    objects = SpanQuerySet.as_manager()

    class Meta:
        # Also serves look-ups by (project, trace_id): no separate trace index needed.
        constraints = [
            models.UniqueConstraint(fields=["project", "trace_id", "span_id"], name="span_unique_ids"),
        ]
        # No (project, start_time) index: spans are read by trace, time-range reads go to
        # ToolCall, and retention drops whole partitions; each index costs every write.

    def __str__(self) -> str:
        return f"{self.name} {self.trace_id}/{self.span_id}"

    @property
    def duration_ms(self) -> float:
        return (self.end_time - self.start_time).total_seconds() * 1000


class ToolCall(models.Model):
    """The normalised tool-call view of one tool span (docs/contract/spans.md); see ingest.normalize."""

    # No database-level foreign key: checking it per row costs the hot write path ~3 µs a
    # span; ingest is the only writer, and deleting a project deletes its rows through Django.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    trace_id = HexIdField(max_length=32)
    span_id = HexIdField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True, default="")
    start_time = models.DateTimeField()
    end_time = models.DateTimeField()
    latency_ms = models.FloatField()
    tool = models.CharField(max_length=256)
    convention = models.CharField(max_length=32)
    tool_type = models.CharField(max_length=64, blank=True, default="")
    call_id = models.CharField(max_length=256, blank=True, default="")
    attempt = models.IntegerField(null=True, blank=True)
    resend_count = models.IntegerField(null=True, blank=True)
    # Written once, read whole (never looked into by a query): `json` (migration 0013).
    arguments = WholeJSONField(null=True, blank=True)
    arguments_hash = models.CharField(max_length=16, blank=True, default="")
    result = WholeJSONField(null=True, blank=True)
    ok = models.BooleanField()
    soft_failure = models.BooleanField(default=False)
    error_class = models.CharField(max_length=16, blank=True, default="")
    classified_by = models.CharField(max_length=512, blank=True, default="")
    error_type = models.CharField(max_length=256, blank=True, default="")
    error_code = models.CharField(max_length=256, blank=True, default="")
    message = models.TextField(blank=True, default="")
    retryable = models.BooleanField(null=True, blank=True)
    field = models.CharField(max_length=256, blank=True, default="")
    suggestion = models.TextField(blank=True, default="")
    retry_after_ms = models.BigIntegerField(null=True, blank=True)
    escalated = models.BooleanField(default=False)
    next_action = models.CharField(max_length=32, blank=True, default="")
    agent = models.CharField(max_length=256, blank=True, default="")
    service = models.CharField(max_length=256, default="unknown_service")
    environment = models.CharField(max_length=256, blank=True, default="")
    fingerprint = models.CharField(max_length=16, blank=True, default="")
    contract = models.JSONField(default=dict, blank=True)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "trace_id", "span_id"], name="toolcall_unique_ids"),
        ]
        indexes = [
            models.Index(fields=["project", "start_time"], name="toolcall_project_start"),
            models.Index(fields=["project", "tool", "start_time"], name="toolcall_project_tool_start"),
            # Tool calls still waiting for their agent span: looked up on most requests, so
            # the look-up must stay cheap however large (or freshly unanalysed) the day is.
            models.Index(fields=["project", "trace_id"], condition=models.Q(agent=""), name="toolcall_agentless"),
            # The traces explorer's filters on failures (class, message text) and on the rarer flags
            # (escalated, soft failure, marked retry): newest-first pages then read only candidate
            # rows. Partial, so a call that matches neither costs ingest nothing here.
            models.Index(fields=["project", "start_time"], condition=models.Q(ok=False), name="toolcall_failed_start"),
            models.Index(
                fields=["project", "start_time"],
                condition=(
                    models.Q(escalated=True) | models.Q(soft_failure=True) | models.Q(attempt__gt=1)
                    | models.Q(resend_count__gt=0)
                ),
                name="toolcall_flagged_start",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {'ok' if self.ok else self.error_class}"


class IngestStat(models.Model):
    """Per project and hour: spans accepted, duplicates, rejected spans, refused requests and
    values cut to the input bounds, by reason."""

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted"
        DUPLICATE = "duplicate"
        REJECTED = "rejected"  # single spans refused inside an accepted request (partial success)
        REFUSED = "refused"  # whole requests refused (4xx); count is requests, not spans
        # values the input bounds cut in stored spans and records; reason: the limit's name
        # (otlp.CUT_*), count: values cut or dropped (docs/contract/limits.md#what-was-cut)
        CUT = "cut"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ingest_stats")
    hour = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    reason = models.CharField(max_length=200, blank=True, default="")
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "hour", "outcome", "reason"], name="ingeststat_unique"),
        ]


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


class ChangedBucket(models.Model):
    """5-minute buckets of tool calls that changed since the rollups last read them: the rollup
    job's queue.

    Ingest marks the buckets of the tool calls it stores in the same transaction, so the
    job, which claims and recomputes them, can never miss a committed call, however late
    it arrives.

    A claim is a lease, not a delete (dashboard/rollups/refresh.py): the job sets
    `claimed_at`/`claimed_by`, recomputes, and deletes only the rows still bearing its own
    claim once their rollup rows are committed. A worker killed meanwhile leaves its rows
    claimed, and the next run takes them over; ingest marking a claimed bucket again clears
    the claim, so the claimant's delete leaves it queued for the calls it may not have read.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    bucket_start = models.DateTimeField()
    # When and by which run (host:pid) the bucket was claimed; null/"" while it waits.
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "bucket_start"], name="changedbucket_unique")]


class LogRecord(models.Model):
    """Every OTLP log record of every project, as received (redacted and truncated like span
    attributes), POST /v1/logs. docs/contract/logs.md.

    A plain table on every database (not day-partitioned like Span and ToolCall): retention
    deletes its old rows by time (ingest.retention). Unique by (project, time, digest): the
    digest names everything the record says (ingest.log_events.record_digest), so an
    exporter's retry of the same record is stored once; the time leads so that the key
    would also serve a table partitioned on it.
    """

    # No database-level foreign key, as on Span: deleting a project deletes its rows through Django.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    time = models.DateTimeField(help_text="time_unix_nano, or the observed time when that is 0.")
    observed_time = models.DateTimeField(null=True, blank=True)
    trace_id = models.CharField(max_length=32, blank=True, default="")
    span_id = models.CharField(max_length=16, blank=True, default="")
    # The agent session's derived trace (ingest.log_events.session_trace_id), where the record is
    # an agent's event naming its session: that trace's page lists the record too.
    session_trace_id = models.CharField(max_length=32, blank=True, default="")
    severity_number = models.SmallIntegerField(default=0)
    severity_text = models.CharField(max_length=64, blank=True, default="")
    # The LogRecord's event_name, else its `event.name` attribute (ingest.log_events.qualified_event_name).
    event_name = models.CharField(max_length=256, blank=True, default="")
    body = models.JSONField(null=True, blank=True)
    attributes = models.JSONField(default=dict)
    flags = models.BigIntegerField(default=0)
    # The tool call the record speaks of (tool_use_id, call_id, a gen_ai.tool.message id), for the
    # joins of docs/contract/logs.md#joins.
    call_id = models.CharField(max_length=256, blank=True, default="")
    resource = models.ForeignKey(
        Resource, on_delete=models.DO_NOTHING, db_index=False, db_constraint=False, related_name="+"
    )
    scope_name = models.CharField(max_length=256, blank=True, default="")
    scope_version = models.CharField(max_length=256, blank=True, default="")
    digest = models.BinaryField(max_length=16)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "time", "digest"], name="logrecord_unique_digest"),
        ]
        indexes = [
            # Retention's DELETE by time.
            models.Index(fields=["project", "time"], name="logrecord_project_time"),
            # A trace's records (the trace page) and the joins to tool spans (by span id or call id
            # within a trace). Partial: records outside any trace cost it nothing.
            models.Index(
                fields=["project", "trace_id", "span_id"], condition=~models.Q(trace_id=""), name="logrecord_trace"
            ),
            models.Index(
                fields=["project", "session_trace_id"], condition=~models.Q(session_trace_id=""),
                name="logrecord_session_trace",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_name or 'log'} {self.time:%Y-%m-%d %H:%M:%S}"
