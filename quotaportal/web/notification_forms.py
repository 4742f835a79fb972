"""Forms of the webhooks console and of a person's e-mail choices."""

from __future__ import annotations

from django import forms

from quotaportal.notifications.models import DetailType, WebhookFormat
from quotaportal.notifications.services import MIN_SECRET
from quotaportal.quotas.models import JobQueue, Team


def _checkboxes(queryset, help_text: str) -> forms.ModelMultipleChoiceField:
    return forms.ModelMultipleChoiceField(
        queryset=queryset,
        required=False,
        to_field_name="name",
        widget=forms.CheckboxSelectMultiple,
        help_text=help_text,
    )


class WebhookForm(forms.Form):
    name = forms.CharField(max_length=128, help_text="What it is for, e.g. ops-alerts.")
    url = forms.CharField(
        max_length=2048,
        label="URL",
        help_text="Where events are POSTed: an http:// or https:// URL.",
    )
    secret = forms.CharField(
        min_length=MIN_SECRET,
        max_length=256,
        widget=forms.PasswordInput(render_value=False),
        help_text=(
            f"At least {MIN_SECRET} characters. Each POST carries X-Quotaportal-Signature: "
            "sha256=HMAC of the body with it."
        ),
    )
    format = forms.ChoiceField(choices=WebhookFormat.choices, initial=WebhookFormat.EVENTBRIDGE)
    detail_types = forms.MultipleChoiceField(
        choices=DetailType.choices,
        required=False,
        label="Event types",
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked: every type.",
    )
    job_queues = _checkboxes(JobQueue.objects.order_by("name"), "None ticked: every queue.")
    teams = _checkboxes(Team.objects.order_by("name"), "None ticked: every team.")


def webhook_fields(cleaned: dict) -> dict:
    """A webhook form's cleaned data as the service takes it (queues and teams by name)."""
    data = dict(cleaned)
    data["job_queues"] = [q.name for q in data["job_queues"]]
    data["teams"] = [t.name for t in data["teams"]]
    if not data.get("secret"):
        data.pop("secret", None)  # editing: kept as it is
    return data


class WebhookEditForm(WebhookForm):
    enabled = forms.BooleanField(required=False, help_text="Untick to pause deliveries.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["secret"].required = False
        self.fields["secret"].help_text = "Leave empty to keep the current secret."


class EmailPreferenceForm(forms.Form):
    on_preempted = forms.BooleanField(required=False, label="When a job of mine is preempted")
    on_failed = forms.BooleanField(required=False, label="When a job of mine fails")
    on_succeeded = forms.BooleanField(required=False, label="When a job of mine succeeds")
