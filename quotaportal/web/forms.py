"""Web forms: field types and choices only; the rules are the services' (errors mapped back)."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    JobQueue,
    QuotaShare,
    State,
    Strategy,
    Team,
    WhatIfSource,
)
from quotaportal.quotas.names import shortened
from quotaportal.quotas.permissions import is_platform_admin, team_ids
from quotaportal.quotas.services.fairness import MAX_HALF_LIFE
from quotaportal.quotas.services.job_fields import MAX_COMMAND_BYTES
from scheduler.fairshare import Counts
from scheduler.validation import (
    MAX_BORROW_LIMIT,
    MAX_PRIORITY,
    MAX_RETRY_ATTEMPTS,
    MIN_PRIORITY,
    MIN_RETRY_ATTEMPTS,
)

LIMIT_ROWS = 5


# Service messages name API fields; a form shows the words on its labels instead.
FIELD_WORDS = {
    "max_capacity": "max capacity",
    "borrow_limit": "borrow limit",
    "sharing_strategy": "sharing strategy",
    "capacity_limits": "capacity limits",
    "scheduling_priority": "priority",
    "quota_share": "quota share",
    "capacity_unit": "capacity unit",
    "retry_attempts": "retry attempts",
    "preemption_retries_before_termination": "preemption retries",
    "simulated_duration_seconds": "simulated duration",
}
API_WORD = re.compile(r"\b(" + "|".join(FIELD_WORDS) + r")\b")


def in_plain_words(message: str) -> str:
    text = API_WORD.sub(lambda m: FIELD_WORDS[m.group(1)], message)
    return text[:1].upper() + text[1:]


def show_service_errors(form: forms.Form, err: ServiceError) -> None:
    """Put each service message next to its field (or at the top when no field matches)."""
    for field, message in err.errors.items():
        form.add_error(field if field in form.fields else None, in_plain_words(message))


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
        min_value=1, max_value=100_000, initial=1, help_text="Instances; all must fit at once."
    )
    scheduling_priority = forms.IntegerField(
        min_value=MIN_PRIORITY,
        max_value=MAX_PRIORITY,
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
    retry_attempts = forms.IntegerField(
        min_value=MIN_RETRY_ATTEMPTS, max_value=MAX_RETRY_ATTEMPTS, initial=1
    )
    preemption_retries_before_termination = forms.IntegerField(
        min_value=0,
        max_value=1_000_000,
        required=False,
        help_text="Leave empty to requeue after every preemption.",
    )
    simulated_duration_seconds = forms.FloatField(
        min_value=0,
        max_value=10_000_000,
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
    scheduling_priority = forms.IntegerField(min_value=MIN_PRIORITY, max_value=MAX_PRIORITY)


class OutputForm(forms.Form):
    """Where the job page reads a job's output from (GET /jobs/<id>/output/)."""

    rank = forms.IntegerField(min_value=0, required=False)
    attempt = forms.IntegerField(min_value=1, required=False)
    offset = forms.IntegerField(min_value=0, required=False)
    download = forms.BooleanField(required=False)


class TerminateForm(forms.Form):
    reason = forms.CharField(max_length=1024, initial="Terminated by user")


class ShareForm(forms.Form):
    job_queue = forms.ModelChoiceField(
        queryset=JobQueue.objects.order_by("name"), to_field_name="name"
    )
    name = forms.CharField(max_length=128)
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"), to_field_name="name")
    sharing_strategy = forms.ChoiceField(
        choices=[(v, v) for v in Strategy.values],
        label="Sharing strategy",
        help_text="RESERVE keeps idle capacity for this share; LEND lends it; LEND_AND_BORROW "
        "lends and may borrow others' idle capacity.",
    )
    borrow_limit = forms.IntegerField(
        required=False,
        min_value=-1,
        max_value=MAX_BORROW_LIMIT,
        label="Borrow limit (%)",
        help_text="LEND_AND_BORROW only: extra capacity as a % of each limit; empty = no cap.",
    )
    in_share_preemption = forms.BooleanField(
        required=False,
        label="In-share preemption",
        help_text="A higher-priority job may preempt lower-priority jobs of this share.",
    )
    state = forms.ChoiceField(
        choices=[(v, v) for v in State.values],
        initial=State.ENABLED,
        help_text="A DISABLED share takes no new jobs; its idle capacity is lent.",
    )
    fair_share_weight = forms.FloatField(
        required=False,
        label="Fair-share weight",
        help_text="Under the queue's fair-share policy, past use counts divided by this: a "
        "share of weight 2 may borrow twice as much before others go first. Empty = 1.",
    )
    capacity_limits = forms.CharField(required=False, widget=forms.HiddenInput)  # carries errors

    def __init__(self, *args, editing: QuotaShare | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        units = CapacityUnit.objects.order_by("name")
        for row in range(1, LIMIT_ROWS + 1):
            self.fields[f"limit_unit_{row}"] = forms.ModelChoiceField(
                queryset=units,
                to_field_name="name",
                required=False,
                label=f"Unit {row}",
                widget=forms.Select(attrs={"aria-label": f"Capacity unit {row}"}),
            )
            self.fields[f"limit_max_{row}"] = forms.IntegerField(
                required=False,
                label=f"Max capacity {row}",
                widget=forms.NumberInput(attrs={"aria-label": f"Max capacity {row}"}),
            )
        if editing is not None:
            for fixed in ("job_queue", "name"):
                self.fields[fixed].disabled = True
                self.fields[fixed].required = False

    def limit_rows(self):
        return [(self[f"limit_unit_{r}"], self[f"limit_max_{r}"]) for r in range(1, LIMIT_ROWS + 1)]

    def capacity_limits_value(self) -> dict[str, int]:
        limits = {}
        for row in range(1, LIMIT_ROWS + 1):
            unit = self.cleaned_data.get(f"limit_unit_{row}")
            count = self.cleaned_data.get(f"limit_max_{row}")
            if unit is None and count is None:
                continue
            if unit is None or count is None:
                self.add_error("capacity_limits", f"row {row}: give both a unit and a max capacity")
                continue
            if unit.name in limits:
                self.add_error("capacity_limits", f"{unit.name} appears twice")
            limits[unit.name] = count
        return limits

    @staticmethod
    def initial_for(share: QuotaShare) -> dict:
        initial = {
            "job_queue": share.job_queue.name,
            "name": share.name,
            "team": share.team.name,
            "sharing_strategy": share.sharing_strategy,
            "borrow_limit": share.borrow_limit if share.borrow_limit != -1 else None,
            "in_share_preemption": share.in_share_preemption,
            "state": share.state,
            "fair_share_weight": share.fair_share_weight,
        }
        limits = share.capacity_limits.select_related("capacity_unit").order_by(
            "capacity_unit__name"
        )
        for row, limit in enumerate(limits, start=1):
            initial[f"limit_unit_{row}"] = limit.capacity_unit.name
            initial[f"limit_max_{row}"] = limit.max_capacity
        return initial


UNIT_COUNTS = re.compile(r"^\s*([^=,\s]+)\s*=\s*(\d+)\s*$")


def parse_unit_counts(text: str) -> dict[str, int]:
    """'a100=2, h100=1' as {"a100": 2, "h100": 1}, or a ValidationError saying how to write it."""
    counts: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        match = UNIT_COUNTS.match(part)
        if not match:
            raise forms.ValidationError(
                f"{shortened(part.strip())!r}: write unit=count pairs separated by commas, "
                "e.g. a100=2"
            )
        if match[1] in counts:
            raise forms.ValidationError(f"{shortened(match[1])} appears twice")
        counts[match[1]] = int(match[2])
    return counts


def unit_counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{unit}={count}" for unit, count in sorted(counts.items()))


SAMPLE_TRACE_HELP = (
    "The trace replayed is the sample shipped with quotaportal (a few hundred of its pods). "
    "For the whole Alibaba GPU cluster trace, download its two CSV files "
    "(openb_node_list_gpu_node.csv and openb_pod_list_gpuspec33.csv, from the folder "
    "cluster-trace-gpu-v2023/csv of github.com/alibaba/clusterdata) into {folder} (in this "
    "checkout, or where QP_TRACE_DIR points) and restart."
)


SHARE_PARTS = ("limits", "strategy", "borrow_limit", "in_share", "state", "weight")


class WhatIfForm(forms.Form):
    """A draft of a queue's shares and capacity, and the workload to replay against it.

    Per existing share i: s{i}_limits, _strategy, _borrow_limit, _in_share, _state, _remove;
    one optional new share: new_name, new_team, new_limits, new_strategy, ...
    """

    capacity = forms.CharField(
        label="Environment capacity",
        help_text="unit=count pairs, e.g. a100=8, h100=2",
        max_length=500,
    )
    source = forms.ChoiceField(label="Replay", widget=forms.RadioSelect)
    fair_share_half_life_hours = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_HALF_LIFE // 3600,
        label="Fair-share half-life (hours)",
        help_text="Borrowers by decayed past use, lowest first (168 = a week); empty: none. "
        "Draft it on (or off) to see its replay beside today's.",
    )
    fair_share_counts = forms.ChoiceField(
        choices=[(c.value, f"{c.value} use") for c in Counts],
        label="Fair share counts",
        required=False,
    )
    since_hours = forms.IntegerField(
        label="History to replay (hours)",
        min_value=1,
        max_value=720,
        initial=168,
        help_text="with the queue's recent jobs: how far back",
    )

    def __init__(self, *args, draft: dict, whole_trace: bool, **kwargs):
        super().__init__(*args, **kwargs)

        self.shares = [s["name"] for s in draft["shares"]]
        self.fields["source"].choices = WhatIfSource.choices
        self.fields["source"].initial = WhatIfSource.HISTORY
        if not whole_trace:
            folder = settings.QP_TRACE_DIR
            self.fields["source"].help_text = SAMPLE_TRACE_HELP.format(folder=folder)
        self.fields["capacity"].initial = unit_counts_text(draft["capacity"])
        fair = draft.get("fair_share") or {}
        half_life = fair.get("half_life_seconds")
        self.fields["fair_share_half_life_hours"].initial = half_life // 3600 if half_life else None
        self.fields["fair_share_counts"].initial = fair.get("counts", Counts.BORROWED.value)
        for index, share in enumerate(draft["shares"]):
            self._share_fields(f"s{index}", share["name"], share)
            self.fields[f"s{index}_remove"] = forms.BooleanField(
                required=False,
                label="remove",
                widget=forms.CheckboxInput(attrs={"aria-label": f"Remove {share['name']}"}),
            )
        self.fields["new_name"] = forms.CharField(
            required=False,
            max_length=128,
            label="New share",
            widget=forms.TextInput(attrs={"aria-label": "New share name", "placeholder": "name"}),
        )
        self.fields["new_team"] = forms.ModelChoiceField(
            label="Team",
            empty_label="team of the new share",
            queryset=Team.objects.order_by("name"),
            to_field_name="name",
            required=False,
            widget=forms.Select(attrs={"aria-label": "New share team"}),
        )
        self._share_fields("new", "the new share", None)
        for name in ("new_limits", "new_strategy", "new_state"):
            self.fields[name].required = False

    def _share_fields(self, prefix: str, label: str, share: dict | None) -> None:
        share = share or {}
        self.fields[f"{prefix}_limits"] = forms.CharField(
            label="Limits",
            max_length=500,
            initial=unit_counts_text(share.get("limits", {})),
            widget=forms.TextInput(attrs={"aria-label": f"Limits of {label}"}),
        )
        self.fields[f"{prefix}_strategy"] = forms.ChoiceField(
            label="Strategy",
            choices=[(v, v) for v in Strategy.values],
            initial=share.get("strategy"),
            widget=forms.Select(attrs={"aria-label": f"Strategy of {label}"}),
        )
        borrow = share.get("borrow_limit", -1)
        self.fields[f"{prefix}_borrow_limit"] = forms.IntegerField(
            label="Borrow limit (%)",
            required=False,
            min_value=-1,
            max_value=MAX_BORROW_LIMIT,
            initial=None if borrow == -1 else borrow,
            widget=forms.NumberInput(attrs={"aria-label": f"Borrow limit of {label} (%)"}),
        )
        self.fields[f"{prefix}_in_share"] = forms.BooleanField(
            label="In-share preemption",
            required=False,
            initial=share.get("in_share_preemption", False),
            widget=forms.CheckboxInput(attrs={"aria-label": f"In-share preemption of {label}"}),
        )
        self.fields[f"{prefix}_state"] = forms.ChoiceField(
            label="State",
            choices=[(v, v) for v in State.values],
            initial=share.get("state", State.ENABLED),
            widget=forms.Select(attrs={"aria-label": f"State of {label}"}),
        )
        self.fields[f"{prefix}_weight"] = forms.FloatField(
            label="Fair-share weight",
            required=False,
            initial=share.get("weight", 1.0),
            widget=forms.NumberInput(attrs={"aria-label": f"Fair-share weight of {label}"}),
        )

    @property
    def capacity_fields(self):
        return [self["capacity"], self["fair_share_half_life_hours"], self["fair_share_counts"]]

    @property
    def workload_fields(self):
        return [self["source"], self["since_hours"]]

    def share_rows(self):
        rows = [(name, f"s{i}") for i, name in enumerate(self.shares)]
        return [
            {
                "name": name,
                "prefix": prefix,
                "fields": [self[f"{prefix}_{part}"] for part in SHARE_PARTS],
                "remove": self[f"{prefix}_remove"],
            }
            for name, prefix in rows
        ]

    def new_row(self):
        """The new share's row: its name and team together under "Share", then the same
        fields, in the same columns, as the other rows."""
        return {
            "name": self["new_name"],
            "team": self["new_team"],
            "fields": [self[f"new_{part}"] for part in SHARE_PARTS],
        }

    def clean_capacity(self):
        return parse_unit_counts(self.cleaned_data["capacity"])

    def draft(self) -> dict | None:
        """The draft the form describes, or None with the errors added."""
        data = self.cleaned_data
        shares = []
        for index, name in enumerate(self.shares):
            entry = self._share_entry(f"s{index}", name)
            if entry is not None:
                entry["remove"] = data.get(f"s{index}_remove", False)
                shares.append(entry)
        if data.get("new_name"):
            entry = self._share_entry("new", data["new_name"].strip())
            if entry is not None:
                team = data.get("new_team")
                if team is None:
                    self.add_error("new_team", "a new share needs a team")
                entry["team"] = team.name if team else None
                entry["remove"] = False
                shares.append(entry)
        if self.errors:
            return None
        hours = data.get("fair_share_half_life_hours")
        fair_share = {
            "half_life_seconds": None if hours is None else hours * 3600,
            "counts": data.get("fair_share_counts") or Counts.BORROWED.value,
        }
        return {"capacity": data["capacity"], "fair_share": fair_share, "shares": shares}

    def _share_entry(self, prefix: str, name: str) -> dict | None:
        data = self.cleaned_data
        try:
            limits = parse_unit_counts(data.get(f"{prefix}_limits", ""))
        except forms.ValidationError as err:
            self.add_error(f"{prefix}_limits", err)
            return None
        strategy = data.get(f"{prefix}_strategy") or Strategy.LEND
        borrow = data.get(f"{prefix}_borrow_limit")
        return {
            "name": name,
            "limits": limits,
            "strategy": strategy,
            "borrow_limit": -1
            if borrow is None or strategy != Strategy.LEND_AND_BORROW
            else borrow,
            "in_share_preemption": data.get(f"{prefix}_in_share", False),
            "state": data.get(f"{prefix}_state") or State.ENABLED,
            "weight": 1.0 if data.get(f"{prefix}_weight") is None else data[f"{prefix}_weight"],
        }

    def show_draft_errors(self, errors: dict[str, str]) -> None:
        """Service errors keyed shares[i].field next to the form's fields."""
        for key, message in errors.items():
            match = re.match(r"shares\[(\d+)\]\.(\w+)", key)
            field = None
            if match:
                index, part = int(match[1]), match[2]
                prefix = f"s{index}" if index < len(self.shares) else "new"
                field = f"{prefix}_{ {'in_share_preemption': 'in_share'}.get(part, part) }"
            elif key in self.fields:
                field = key
            self.add_error(field if field in self.fields else None, in_plain_words(message))
