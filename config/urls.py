from django.contrib import admin
from django.urls import path

from ingest import views as ingest_views

urlpatterns = [
    path("v1/traces", ingest_views.traces, name="otlp-traces"),
    path("admin/", admin.site.urls),
]
