"""`/api/v1/projects/<slug>/agent-access/`: the agent access log (MCP server, tool-health feed).
Owners only: a member gets 403, an outsider 404 (dashboard/agent_access.py keeps the rows)."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.views import APIView

from dashboard import agent_access
from dashboard.api.base import ProjectScopedMixin
from dashboard.models import AgentAccess
from dashboard.scoping import is_owner


class AgentAccessSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username", allow_null=True, default=None)
    token = serializers.CharField(source="token.prefix", allow_null=True, default=None, help_text="The token's visible prefix.")
    token_name = serializers.CharField(source="token.name", allow_null=True, default=None)

    class Meta:
        model = AgentAccess
        fields = ["id", "at", "surface", "name", "arguments", "outcome", "duration_ms", "user", "token", "token_name"]


class AgentAccessApi(ProjectScopedMixin, APIView):
    query_parameters = {"surface": str}

    @extend_schema(
        operation_id="agent_access_list",
        summary="Who asked what, when, through the MCP server and the tool-health feed (owners only)",
        parameters=[
            OpenApiParameter("project", OpenApiTypes.STR, OpenApiParameter.PATH, description="The project's slug."),
            OpenApiParameter("surface", OpenApiTypes.STR, enum=list(agent_access.SURFACES), description="Only this surface."),
            OpenApiParameter("page", OpenApiTypes.INT, description="Page number (50 a page), newest first."),
        ],
        responses={200: AgentAccessSerializer(many=True)},
    )
    def get(self, request, project):
        if not is_owner(request.user, self.project):
            raise PermissionDenied("Only the project's owners can see its agent access log.")
        surface = request.query_params.get("surface", "")
        if surface and surface not in agent_access.SURFACES:
            raise ValidationError({"surface": [f"surface={surface!r} is not one of {', '.join(agent_access.SURFACES)}"]})
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(agent_access.access_for_project(self.project, surface=surface), request, view=self)
        return paginator.get_paginated_response(AgentAccessSerializer(page, many=True).data)


urlpatterns = [
    path("projects/<slug:project>/agent-access/", AgentAccessApi.as_view(), name="api-agent-access"),
]
