"""Evals API routes, under /api/v1/ (see evals/api/views.py)."""

from django.urls import path

from evals.api import views

P = "projects/<slug:project>"

urlpatterns = [
    path(f"{P}/eval-cases/", views.CaseListCreate.as_view(), name="api-eval-cases"),
    path(f"{P}/eval-cases/export.jsonl", views.CaseExport.as_view(), name="api-eval-export"),
    path(f"{P}/eval-cases/<int:pk>/", views.CaseDetail.as_view(), name="api-eval-case"),
    path(f"{P}/eval-cases/<int:pk>/pin/", views.CasePin.as_view(), name="api-eval-case-pin"),
    path(f"{P}/eval-cases/<int:pk>/retire/", views.CaseRetire.as_view(), name="api-eval-case-retire"),
    path(f"{P}/eval-cases/<int:pk>/restore/", views.CaseRestore.as_view(), name="api-eval-case-restore"),
    path(f"{P}/eval-cases/<int:pk>/tags/", views.CaseTags.as_view(), name="api-eval-case-tags"),
    path(f"{P}/eval-cases/<int:pk>/versions/", views.CaseVersions.as_view(), name="api-eval-case-versions"),
    path(f"{P}/eval-cases/<int:pk>/results/", views.CaseResults.as_view(), name="api-eval-case-results"),
    path(f"{P}/eval-runs/", views.RunListCreate.as_view(), name="api-eval-runs"),
    path(f"{P}/eval-runs/<int:pk>/", views.RunDetail.as_view(), name="api-eval-run"),
    path(f"{P}/eval-runs/<int:pk>/results/", views.RunResults.as_view(), name="api-eval-run-results"),
]
