from django.contrib import admin

from evals.models import EvalCase, EvalCaseVersion, EvalResult, EvalRun


class VersionInline(admin.TabularInline):
    model = EvalCaseVersion
    extra = 0
    fields = ["number", "expect", "timeout_s", "content_hash", "pinned_at"]
    readonly_fields = fields  # a pinned version must never change, not even here


@admin.register(EvalCase)
class EvalCaseAdmin(admin.ModelAdmin):
    list_display = ["id", "title", "tool", "project", "pinned_version", "latest_version", "retired_at"]
    list_filter = ["project"]
    search_fields = ["title", "tool", "message"]
    readonly_fields = ["trace_id", "span_id", "observed", "fingerprint", "observed_at"]
    inlines = [VersionInline]


class ResultInline(admin.TabularInline):
    model = EvalResult
    extra = 0
    fields = ["case", "version", "status", "regression", "reasons"]
    readonly_fields = fields


@admin.register(EvalRun)
class EvalRunAdmin(admin.ModelAdmin):
    list_display = ["id", "label", "project", "started_at", "passed", "failed", "errors", "regressions"]
    list_filter = ["project"]
    inlines = [ResultInline]
