"""`/mcp`, mounted by config/urls.py with include() (config imports no dashboard module)."""

from django.urls import re_path

from dashboard.mcp import http

urlpatterns = [
    re_path(r"^mcp/?$", http.mcp_endpoint, name="mcp"),  # the MCP server, Streamable HTTP (docs/mcp.md)
]
