"""Eval case and run pages (the API is in evals/api/urls.py)."""

from django.urls import path

from evals import views

urlpatterns = [
    path("p/<slug:project>/evals/", views.case_list, name="eval-cases"),
    path("p/<slug:project>/evals/export.jsonl", views.case_export, name="eval-export"),
    path("p/<slug:project>/evals/promote/<str:trace_id>/<str:span_id>/", views.promote, name="eval-promote"),
    path("p/<slug:project>/evals/cases/<int:pk>/", views.case_detail, name="eval-case"),
    path("p/<slug:project>/evals/cases/<int:pk>/edit/", views.case_edit, name="eval-case-edit"),
    path("p/<slug:project>/evals/cases/<int:pk>/pin/", views.case_pin, name="eval-case-pin"),
    path("p/<slug:project>/evals/cases/<int:pk>/retire/", views.case_retire, name="eval-case-retire"),
    path("p/<slug:project>/evals/cases/<int:pk>/tags/", views.case_tags, name="eval-case-tags"),
    path("p/<slug:project>/evals/runs/", views.run_list, name="eval-runs"),
    path("p/<slug:project>/evals/runs/<int:pk>/", views.run_detail, name="eval-run"),
]
