from django.contrib import admin

from ingest.models import ApiKey, Project, Resource


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "retention_days", "created_at")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "name", "project", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "hashed_key")


@admin.register(Resource)
class ResourceAdmin(admin.ModelAdmin):
    """Read-only: ingest writes resources, and spans refer to them by id."""

    list_display = ("__str__", "project", "first_seen", "last_seen")
    list_filter = ("project",)
    readonly_fields = ("project", "digest_hex", "attributes", "first_seen", "last_seen")
    exclude = ("digest",)

    @admin.display(description="digest")
    def digest_hex(self, resource: Resource) -> str:
        return bytes(resource.digest).hex()

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # spans refer to it; retention deletes resources no span can use
