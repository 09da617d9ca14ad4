"""`/api/v1/projects/`: the caller's projects, and one of them by slug (404 for outsiders)."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import generics, serializers

from dashboard.api.base import ProjectScopedMixin
from dashboard.api.query import query_parameters_check
from ingest.models import Project

ERROR_DETAIL = inline_serializer("ApiErrorDetail", {"detail": serializers.CharField()})
NOT_FOUND = OpenApiResponse(
    ERROR_DETAIL,
    description="No such project among yours (the same answer whether or not it exists).",
)
UNAUTHORIZED = OpenApiResponse(
    ERROR_DETAIL,
    description="No token, or one that is unknown, revoked or expired, or a project ingest key; `detail` says which.",
)


class ProjectSerializer(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["slug", "name", "created_at", "retention_days", "escalation_tools"]
        read_only_fields = fields


def projects_visible_to(user):
    # The rule of dashboard.scoping.projects_for_user, as a queryset so a page of it is one LIMIT query.
    if user.is_superuser:
        return Project.objects.order_by("name", "pk")
    return Project.objects.filter(members=user).order_by("name", "pk")


class ProjectList(generics.ListAPIView):
    serializer_class = ProjectSerializer

    def get_queryset(self):
        return projects_visible_to(self.request.user)

    @extend_schema(
        operation_id="projects_list",
        summary="Your projects",
        description="The projects you are a member of, by name, paginated (`?page=`).",
        tags=["projects"],
        responses={200: ProjectSerializer(many=True), 401: UNAUTHORIZED},
    )
    def get(self, request, *args, **kwargs):
        query_parameters_check(request.query_params, {})  # `page` only (dashboard/api/query.py)
        return super().get(request, *args, **kwargs)


class ProjectDetail(ProjectScopedMixin, generics.RetrieveAPIView):
    serializer_class = ProjectSerializer
    # Documents the path parameter for drf-spectacular; the object comes from ProjectScopedMixin.
    queryset = Project.objects.none()
    lookup_field = "slug"
    lookup_url_kwarg = "project"

    def get_object(self) -> Project:
        return self.project

    @extend_schema(
        operation_id="projects_retrieve",
        summary="One project",
        description="A project you are a member of; 404 for any other slug, whether or not it exists.",
        tags=["projects"],
        parameters=[OpenApiParameter("project", OpenApiTypes.STR, OpenApiParameter.PATH, description="The project's slug.")],
        responses={200: ProjectSerializer, 401: UNAUTHORIZED, 404: NOT_FOUND},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


urlpatterns = [
    path("projects/", ProjectList.as_view(), name="api-projects"),
    path("projects/<slug:project>/", ProjectDetail.as_view(), name="api-project"),
]
