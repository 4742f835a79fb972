"""The what-if form: a draft of a queue's shares and capacity, and the workload to replay."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from quotaportal.quotas.models import (
    State,
    Strategy,
    Team,
    WhatIfSource,
)
from quotaportal.quotas.services.fairness import MAX_HALF_LIFE
from quotaportal.web.forms.common import in_plain_words, parse_unit_counts, unit_counts_text
from scheduler.fairshare import Counts
from scheduler.validation import (
    MAX_BORROW_LIMIT,
)

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
