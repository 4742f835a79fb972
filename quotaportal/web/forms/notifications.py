"""Forms of the webhooks console and of a person's own settings: e-mail choices, API tokens."""

from __future__ import annotations

from django import forms

from quotaportal.notifications.models import DetailType, WebhookFormat
from quotaportal.notifications.services import MIN_SECRET
from quotaportal.quotas.models import JobQueue, Scope, Team


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


class PersonalTokenForm(forms.Form):
    """A new personal API token: what uses it, what it may do, how long it lasts."""

    name = forms.CharField(
        max_length=100, help_text="What uses it, e.g. sweep-launcher on ci-runner-3."
    )
    scope = forms.ChoiceField(
        choices=Scope.choices,
        initial=Scope.FULL,
        widget=forms.RadioSelect,
        help_text="Read only: it may list and read, never submit, change or terminate.",
    )
    expires_in_days = forms.TypedChoiceField(
        label="Expires",
        coerce=int,
        empty_value=None,
        required=False,
        initial=90,
        choices=[
            (7, "in 7 days"),
            (30, "in 30 days"),
            (90, "in 90 days"),
            (366, "in a year"),
            ("", "never"),
        ],
        help_text="A token that expires cannot be forgotten in a script for years.",
    )
