from django.contrib import admin

from ingest.models import ApiKey, Project


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "retention_days", "created_at")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "project", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "hashed_key")
