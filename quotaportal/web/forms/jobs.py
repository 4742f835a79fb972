"""The job forms: submitting, a new priority, reading output, terminating."""

from __future__ import annotations

from django import forms
from django.conf import settings

from quotaportal.jobs.fields import MAX_COMMAND_BYTES
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    QuotaShare,
    State,
)
from quotaportal.quotas.permissions import is_platform_admin, team_ids
from scheduler.validation import MAX_PRIORITY, MIN_PRIORITY, value_range


class JobSubmitForm(forms.Form):
    quota_share = forms.ModelChoiceField(
        queryset=QuotaShare.objects.none(),
        label="Quota share",
        help_text="The queue and share to submit to.",
    )
    name = forms.CharField(max_length=128)
    capacity_unit = forms.ModelChoiceField(
        queryset=CapacityUnit.objects.order_by("name"),
        to_field_name="name",
        help_text="Instance type or GPU model.",
    )
    quantity = forms.IntegerField(
        **value_range("quantity"), initial=1, help_text="Instances; all must fit at once."
    )
    scheduling_priority = forms.IntegerField(
        **value_range("scheduling_priority"),
        initial=0,
        help_text=f"{MIN_PRIORITY}–{MAX_PRIORITY}; higher runs first within the share.",
    )
    command = forms.CharField(
        required=False,
        max_length=MAX_COMMAND_BYTES,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Run on the GPU host (LOCAL environments), as `sh -c`. The demo prefills a "
        "job that prints progress for two minutes and checkpoints when preempted.",
    )
    retry_attempts = forms.IntegerField(**value_range("retry_attempts"), initial=1)
    preemption_retries_before_termination = forms.IntegerField(
        **value_range("preemption_retries_before_termination"),
        required=False,
        help_text="Leave empty to requeue after every preemption.",
    )
    simulated_duration_seconds = forms.FloatField(
        **value_range("simulated_duration_seconds"),
        required=False,
        help_text="SIMULATED environments: how long the job runs.",
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["command"].initial = settings.QP_EXAMPLE_COMMAND
        shares = QuotaShare.objects.select_related("job_queue").filter(state=State.ENABLED)
        if not is_platform_admin(user):
            shares = shares.filter(team_id__in=team_ids(user))
        field = self.fields["quota_share"]
        field.queryset = shares.order_by("job_queue__name", "name")
        field.label_from_instance = lambda s: f"{s.job_queue.name} / {s.name}"
        self._fit_to(list(field.queryset.select_related("job_queue__service_environment")))

    def _fit_to(self, shares: list) -> None:
        """Offer what the user's shares can take: the only share or unit preselected, the
        units the shares have limits for, and a simulated duration only where one counts."""
        if len(shares) == 1:
            self.fields["quota_share"].initial = shares[0].pk
        units = CapacityUnit.objects.filter(
            sharecapacitylimit__share__in=[s.pk for s in shares]
        ).distinct()
        names = list(units.order_by("name").values_list("name", flat=True))
        if names:
            self.fields["capacity_unit"].queryset = units.order_by("name")
            if len(names) == 1:
                self.fields["capacity_unit"].initial = names[0]
        if not any(s.job_queue.service_environment.backend == Backend.SIMULATED for s in shares):
            del self.fields["simulated_duration_seconds"]


class PriorityForm(forms.Form):
    scheduling_priority = forms.IntegerField(**value_range("scheduling_priority"))


class OutputForm(forms.Form):
    """Where the job page reads a job's output from (GET /jobs/<id>/output/)."""

    rank = forms.IntegerField(min_value=0, required=False)
    attempt = forms.IntegerField(min_value=1, required=False)
    offset = forms.IntegerField(min_value=0, required=False)
    download = forms.BooleanField(required=False)


class TerminateForm(forms.Form):
    reason = forms.CharField(max_length=1024, initial="Terminated by user")
