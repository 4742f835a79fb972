"""The quota share form (create and edit), its capacity limits one row per unit."""

from __future__ import annotations

from django import forms

from quotaportal.quotas.models import (
    CapacityUnit,
    JobQueue,
    QuotaShare,
    State,
    Strategy,
    Team,
)
from scheduler.validation import (
    MAX_BORROW_LIMIT,
)

LIMIT_ROWS = 5


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
