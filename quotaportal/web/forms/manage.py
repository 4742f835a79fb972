"""Forms of the admin console: field types and choices; the rules stay in the services."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from quotaportal.quotas import names
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    Ordering,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
    Team,
)
from quotaportal.quotas.services.environments import AWS_CONNECTION_FIELDS
from quotaportal.quotas.services.fairness import MAX_HALF_LIFE
from quotaportal.quotas.services.resources import MAX_GPUS_PER_UNIT
from quotaportal.web.forms.common import parse_unit_counts
from scheduler.fairshare import Counts

# The names the services take (quotas.names: AWS's rule; units may hold dots), checked here
# first so the form says so next to the field.
RESOURCE_NAME = rf"^{names.AWS_NAME.pattern}\Z"
UNIT_NAME = rf"^{names.UNIT_NAME.pattern}\Z"
NAME_HELP = f"{names.AWS_NAME_RULE[0].upper()}{names.AWS_NAME_RULE[1:]}."


def _name(
    pattern: str = RESOURCE_NAME,
    help_text: str = NAME_HELP,
    rule: str = names.AWS_NAME_RULE,
    **kwargs,
) -> forms.Field:
    """A name field: `help_text` says what it is for, an error always states the rule."""
    return forms.RegexField(
        regex=pattern,
        max_length=128,
        help_text=help_text,
        error_messages={"invalid": f"Use {rule}."},
        **kwargs,
    )


def _choices(values) -> list[tuple[str, str]]:
    return [(v, v) for v in values]


class TeamForm(forms.Form):
    name = _name(
        r"^[-a-zA-Z0-9_]{1,64}\Z",
        "Up to 64 letters, digits, - or _ (no spaces).",
        "1 to 64 letters, digits, - or _ (no spaces)",
        label="Name",
    )


class MemberForm(forms.Form):
    user = forms.ModelChoiceField(queryset=None, to_field_name="username")
    role = forms.ChoiceField(
        choices=[("member", "Member"), ("admin", "Team admin")],
        help_text="Team admins act on every job of the team; members on their own and the team's.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["user"].queryset = get_user_model().objects.filter(is_active=True)


class UserCreateForm(forms.Form):
    username = forms.CharField(
        max_length=150, help_text="Letters, digits and @ . + - _ (no spaces)."
    )
    email = forms.EmailField(required=False)
    admin = forms.BooleanField(
        required=False, label="Platform admin", help_text="Admins change shares and settings."
    )
    teams = forms.ModelMultipleChoiceField(
        queryset=Team.objects.order_by("name"),
        required=False,
        to_field_name="name",
        widget=forms.CheckboxSelectMultiple,
    )


class UserEmailForm(forms.Form):
    # Checked by the service (accounts.set_email): its message says what to write.
    email = forms.CharField(
        required=False,
        max_length=254,
        label="E-mail",
        help_text="Where the job e-mails this person asks for go; empty for none.",
    )


class UnitForm(forms.Form):
    name = _name(
        UNIT_NAME,
        "An instance type or GPU model: letters, digits, . - _ (up to 64).",
        names.UNIT_NAME_RULE,
    )
    gpus_per_unit = forms.IntegerField(min_value=1, max_value=MAX_GPUS_PER_UNIT, initial=1)
    description = forms.CharField(max_length=200, required=False)


class UnitEditForm(UnitForm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        del self.fields["name"]


class CapacityField(forms.CharField):
    """'a100=4, h100=2' as a dict; an empty value is left to the service to refuse."""

    def to_python(self, value):
        return parse_unit_counts(super().to_python(value))


CAPACITY_HELP = "Instances per capacity unit, e.g. a100=4, h100=2."


class AwsConnectionFields(forms.Form):
    """Where an AWS_BATCH environment calls AWS. No credentials: boto3 finds them in its
    standard chain on the server (environment variables, this profile, an instance role)."""

    region = forms.CharField(
        max_length=32, required=False, help_text="AWS_BATCH only: the AWS region, e.g. us-west-2."
    )
    endpoint_url = forms.CharField(
        label="Endpoint URL",
        max_length=256,
        required=False,
        help_text="AWS_BATCH only, optional: another Batch endpoint (empty: AWS's own).",
    )
    aws_profile = forms.CharField(
        label="AWS profile",
        max_length=64,
        required=False,
        help_text=(
            "AWS_BATCH only, optional: a profile of the server's AWS config files (empty: "
            "environment variables or the instance role). Secrets are never entered here."
        ),
    )


AWS_FIELDS = list(AWS_CONNECTION_FIELDS)


class EnvironmentForm(AwsConnectionFields):
    field_order = ["name", "backend", "capacity_limits", "state", *AWS_FIELDS]
    name = _name()
    backend = forms.ChoiceField(
        choices=_choices(Backend.values),
        initial=Backend.SIMULATED,
        help_text=(
            "LOCAL runs jobs on your GPU hosts; SLURM on your Slurm cluster (the portal "
            "decides, Slurm places and runs); AWS_BATCH mirrors the queue into AWS Batch, "
            "which schedules it; SIMULATED only pretends (demos, what-if)."
        ),
    )
    capacity_limits = CapacityField(
        label="Capacity", max_length=1000, help_text=CAPACITY_HELP, required=False
    )
    state = forms.ChoiceField(choices=_choices(State.values), initial=State.ENABLED)


class EnvironmentEditForm(AwsConnectionFields):
    field_order = ["capacity_limits", "state", *AWS_FIELDS]
    capacity_limits = CapacityField(
        label="Capacity", max_length=1000, help_text=CAPACITY_HELP, required=False
    )
    state = forms.ChoiceField(
        choices=_choices(State.values),
        help_text="A DISABLED environment starts nothing new; running jobs go on.",
    )

    def __init__(self, *args, aws: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if not aws:
            for name in AWS_FIELDS:
                del self.fields[name]


class AwsImportForm(forms.Form):
    job_queue = forms.CharField(
        label="AWS job queue",
        max_length=512,
        help_text="Its name or ARN. Its policy, shares and non-final jobs come along; "
        "nothing is created in AWS.",
    )


class ReservationForm(forms.Form):
    name = _name(help_text="For example the training plan's name.")
    capacity_unit = forms.ModelChoiceField(
        queryset=CapacityUnit.objects.order_by("name"), to_field_name="name"
    )
    instances = forms.IntegerField(min_value=1, max_value=1_000_000)
    starts_at = forms.DateTimeField(
        label="Starts (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    ends_at = forms.DateTimeField(
        label="Ends (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )


class PolicyForm(forms.Form):
    name = _name()


class QueueSettingsForm(forms.Form):
    scheduling_policy = forms.ModelChoiceField(
        queryset=SchedulingPolicy.objects.order_by("name"), to_field_name="name"
    )
    priority = forms.IntegerField(
        min_value=0,
        max_value=1000,
        initial=1,
        help_text="Queues on one environment take capacity in this order, higher first.",
    )
    ordering = forms.ChoiceField(
        choices=_choices(Ordering.values),
        help_text="STRICT: a share whose head waits starts nothing else; BEST_EFFORT lets "
        "smaller jobs behind it start.",
    )
    preemption_grace_seconds = forms.IntegerField(
        min_value=0,
        max_value=86_400,
        initial=30,
        label="Preemption grace (s)",
        help_text="Between SIGTERM and SIGKILL of a preempted job.",
    )
    state = forms.ChoiceField(choices=_choices(State.values), initial=State.ENABLED)
    fair_share_half_life_hours = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_HALF_LIFE // 3600,
        label="Fair-share half-life (hours)",
        help_text="With a half-life, shares borrow in order of their past use, which halves "
        "every this many hours (168 = a week): the share that used least borrows first. "
        "Empty: no fair-share policy (the oldest job borrows first).",
    )
    fair_share_counts = forms.ChoiceField(
        choices=[(c.value, f"{c.value} use") for c in Counts],
        initial=Counts.BORROWED.value,
        required=False,
        label="Fair share counts",
        help_text="borrowed: only use beyond a share's limits counts; all: every use does.",
    )


def pop_fair_share(data: dict) -> dict:
    """The policy fields out of a queue form's cleaned data, as usage.fairness.set_policy
    takes them (the rest goes to the queue's service)."""
    hours = data.pop("fair_share_half_life_hours", None)
    counts = data.pop("fair_share_counts", None) or Counts.BORROWED.value
    return {"half_life_seconds": None if hours is None else hours * 3600, "counts": counts}


class QueueForm(QueueSettingsForm):
    name = _name()
    service_environment = forms.ModelChoiceField(
        queryset=ServiceEnvironment.objects.order_by("name"), to_field_name="name"
    )
    field_order = ["name", "service_environment", "scheduling_policy"]
