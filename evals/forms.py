"""Page forms: the expectation (the contract's options), promotion, editing, tags.

The forms only parse; `evals.services` validates and writes, and an `EvalError` it raises
comes back onto the field it names (`add_service_error`).
"""

from __future__ import annotations

import json

from django import forms

from evals import services
from ingest.taxonomy import CLASSES, CONTRACT_CHECKS, NEXT_ACTIONS

OUTCOME_CHOICES = [("success", "The call now succeeds"), ("error", "The call fails, in an actionable way")]
CLASS_CHOICES = [("", "any class"), *[(name, name) for name in CLASSES]]
CHECK_CHOICES = [(name, f"{name}: {description}") for name, description in CONTRACT_CHECKS]
ACTION_CHOICES = [("", "any (not checked)"), *[(name, f"{name}: {meaning}") for name, meaning in NEXT_ACTIONS.items()]]


class ExpectationForm(forms.Form):
    title = forms.CharField(max_length=200)
    outcome = forms.ChoiceField(choices=OUTCOME_CHOICES, widget=forms.RadioSelect, label="Expected outcome")
    error_class = forms.ChoiceField(choices=CLASS_CHOICES, required=False, label="Error class (when it fails)")
    contract_checks = forms.MultipleChoiceField(
        choices=CHECK_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
        label="Contract checks the error must pass",
    )  # fmt: skip
    next_action = forms.ChoiceField(choices=ACTION_CHOICES, required=False, label="Next action it must lead to")
    timeout_s = forms.IntegerField(min_value=1, max_value=services.MAX_TIMEOUT_S, label="Timeout (seconds)")

    def expectation(self) -> dict:
        data = self.cleaned_data
        if data["outcome"] == "success":
            return {"outcome": "success"}
        return {
            "outcome": "error",
            "error_class": data.get("error_class") or None,
            "contract_checks": list(data.get("contract_checks") or []),
            "next_action": data.get("next_action") or None,
        }

    @staticmethod
    def initial_from(expect: dict, **extra) -> dict:
        return {
            "outcome": expect.get("outcome", "success"),
            "error_class": expect.get("error_class") or "",
            "contract_checks": expect.get("contract_checks") or [],
            "next_action": expect.get("next_action") or "",
            **extra,
        }

    def add_service_error(self, error: services.EvalError) -> None:
        field = error.field if error.field in self.fields else None
        self.add_error(field, error.message if field else f"{error.field}: {error.message}")


class PromoteForm(ExpectationForm):
    tags = forms.CharField(required=False, max_length=1000, help_text="Separated by commas or spaces.")


class CaseEditForm(ExpectationForm):
    arguments = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"}), required=False,
        label="Arguments (JSON)", help_text="What the runner calls the tool with: an object, a list, a value or null.",
    )  # fmt: skip

    def clean_arguments(self):
        text = self.cleaned_data["arguments"].strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc}") from None


class TagsForm(forms.Form):
    tags = forms.CharField(required=False, max_length=1000, help_text="Separated by commas or spaces.")
