from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from config import ops
from ingest import views as ingest_views

urlpatterns = [
    re_path(r"^v1/traces/?$", ingest_views.traces, name="otlp-traces"),  # OTLP paths: with or without a trailing slash
    re_path(r"^v1/logs/?$", ingest_views.logs, name="otlp-logs"),
    re_path(r"^v1/metrics/?$", ingest_views.metrics, name="otlp-metrics"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("metrics", ops.metrics, name="ops-metrics"),  # Prometheus; OTLP metrics stay on /v1/metrics
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("dashboard.api.urls")),
    path("", include("dashboard.mcp.urls")),  # /mcp: the MCP server, Streamable HTTP (docs/mcp.md)
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("dashboard.urls")),
]
