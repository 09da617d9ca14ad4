"""Input and output shapes of the evals API (docs/contract/eval-cases.md#runner--server-rest-contract for the run POST and the export)."""

from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from evals.models import EvalCase, EvalCaseVersion, EvalResult, EvalRun, SnapshotSpan

# --- output ------------------------------------------------------------------------------


class VersionSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="number")
    arguments = serializers.JSONField(allow_null=True)
    expect = serializers.JSONField()
    pinned = serializers.BooleanField(source="is_pinned")

    class Meta:
        model = EvalCaseVersion
        fields = ["version", "arguments", "expect", "timeout_s", "content_hash", "pinned", "pinned_at", "created_at"]


class LastResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=EvalResult.Status.choices)
    regression = serializers.BooleanField()
    run_id = serializers.IntegerField()


class CaseSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=EvalCase.Status.choices, read_only=True)
    tags = serializers.SerializerMethodField()
    last_result = serializers.SerializerMethodField()
    recurring_calls = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = EvalCase
        fields = [
            "id", "title", "tool", "status", "tags", "trace_id", "span_id", "error_class", "message",
            "fingerprint", "observed_at", "latest_version", "pinned_version", "pinned_at", "retired_at",
            "created_at", "last_result", "recurring_calls", "url",
        ]  # fmt: skip

    def get_tags(self, case) -> list[str]:
        return [tag.name for tag in case.tags.all()]

    def get_last_result(self, case) -> LastResultSerializer(allow_null=True):  # type: ignore[valid-type]
        if getattr(case, "last_status", None) is None:
            return None
        return {"status": case.last_status, "regression": case.last_regression, "run_id": case.last_run_id}

    def get_recurring_calls(self, case) -> int:
        return getattr(case, "recurring_calls", 0) or 0

    def get_url(self, case) -> str:
        return reverse("eval-case", args=[self.context["project"].slug, case.pk])


class SnapshotSpanSerializer(serializers.ModelSerializer):
    attributes = serializers.JSONField()
    events = serializers.JSONField()
    tool_call = serializers.JSONField(allow_null=True)

    class Meta:
        model = SnapshotSpan
        fields = [
            "position", "depth", "role", "span_id", "parent_span_id", "name", "kind", "start_time", "end_time",
            "status_code", "status_message", "service", "environment", "agent", "attributes", "events", "tool_call",
        ]  # fmt: skip


class CaseDetailSerializer(CaseSerializer):
    observed = serializers.JSONField()
    versions = VersionSerializer(many=True, read_only=True)
    snapshot = SnapshotSpanSerializer(many=True, read_only=True)

    class Meta(CaseSerializer.Meta):
        fields = [*CaseSerializer.Meta.fields, "observed", "versions", "snapshot"]


class PromotionSerializer(CaseDetailSerializer):
    created = serializers.SerializerMethodField()

    class Meta(CaseDetailSerializer.Meta):
        fields = [*CaseDetailSerializer.Meta.fields, "created"]

    def get_created(self, case) -> bool:
        return self.context["created"]


class RunSerializer(serializers.ModelSerializer):
    regression_count = serializers.IntegerField(source="regressions")
    url = serializers.SerializerMethodField()

    class Meta:
        model = EvalRun
        fields = [
            "id", "label", "git_sha", "started_at", "finished_at", "created_at", "passed", "failed", "errors",
            "regression_count", "url",
        ]  # fmt: skip

    def get_url(self, run) -> str:
        return reverse("eval-run", args=[self.context["project"].slug, run.pk])


class RunDetailSerializer(RunSerializer):
    regressions = serializers.SerializerMethodField(help_text="Ids of the cases that regressed in this run.")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "regressions"]

    def get_regressions(self, run) -> list[int]:
        return sorted(run.results.filter(regression=True).values_list("case_id", flat=True))


class RunCreatedSerializer(serializers.Serializer):
    """The contract's 201 answer to a posted run."""

    id = serializers.IntegerField()
    url = serializers.CharField()
    passed = serializers.IntegerField()
    failed = serializers.IntegerField()
    errors = serializers.IntegerField()
    regressions = serializers.ListField(child=serializers.IntegerField(), help_text="Ids of the cases that regressed.")


class ResultSerializer(serializers.ModelSerializer):
    run_id = serializers.IntegerField()
    case_id = serializers.IntegerField()
    version = serializers.IntegerField(source="version.number")
    content_hash = serializers.CharField(source="version.content_hash")
    tool = serializers.CharField(source="case.tool")
    reasons = serializers.ListField(child=serializers.CharField())
    observed = serializers.JSONField(allow_null=True)

    class Meta:
        model = EvalResult
        fields = [
            "run_id", "case_id", "version", "content_hash", "tool", "status", "regression", "reasons", "observed",
            "duration_ms",
        ]  # fmt: skip


# --- input -------------------------------------------------------------------------------


class PromoteInput(serializers.Serializer):
    trace_id = serializers.CharField(max_length=32)
    span_id = serializers.CharField(max_length=16)
    title = serializers.CharField(max_length=200, required=False, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField(max_length=64), required=False)
    expect = serializers.JSONField(required=False, help_text="An expectation; default: suggested from the failure.")
    timeout_s = serializers.IntegerField(required=False, min_value=1)


class CaseUpdateInput(serializers.Serializer):
    """Changes to a case. Expectation, arguments and timeout go to its draft version (a new one if pinned)."""

    title = serializers.CharField(max_length=200, required=False)
    expect = serializers.JSONField(required=False)
    arguments = serializers.JSONField(required=False, allow_null=True)
    timeout_s = serializers.IntegerField(required=False, min_value=1)


class TagsInput(serializers.Serializer):
    tags = serializers.ListField(child=serializers.CharField(max_length=200), allow_empty=True)


class ResultInput(serializers.Serializer):
    """One result of a posted run (documentation only: the service checks each field and names it)."""

    case_id = serializers.IntegerField()
    version = serializers.IntegerField()
    content_hash = serializers.CharField()
    status = serializers.ChoiceField(choices=EvalResult.Status.choices)
    reasons = serializers.ListField(child=serializers.CharField(), required=False)
    observed = serializers.JSONField(required=False, allow_null=True)
    duration_ms = serializers.IntegerField(required=False, allow_null=True)


class RunInput(serializers.Serializer):
    label = serializers.CharField(max_length=200)
    git_sha = serializers.CharField(max_length=64, required=False, allow_null=True, allow_blank=True)
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField()
    results = serializers.ListField(child=serializers.JSONField(), allow_empty=True)


class RunInputDoc(RunInput):
    """The documented shape of a posted run."""

    results = ResultInput(many=True)
