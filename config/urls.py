from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import views as dashboard_views
from ingest import views as ingest_views

urlpatterns = [
    path("v1/traces", ingest_views.traces, name="otlp-traces"),
    path("", dashboard_views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
]
