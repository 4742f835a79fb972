"""The admin console's forms for a SLURM environment: how to reach the cluster, and what each
capacity unit is there. The services check every value (it ends up on a command line)."""

from __future__ import annotations

from django import forms

SIGNALS = [(name, f"SIG{name}") for name in ("TERM", "USR1", "USR2", "INT", "HUP")]


class UserMapField(forms.CharField):
    """ "alice=asmith, bob=bjones" as {"alice": "asmith", "bob": "bjones"}."""

    def to_python(self, value):
        text = super().to_python(value) or ""
        mapped = {}
        for pair in (p.strip() for p in text.replace("\n", ",").split(",")):
            if not pair:
                continue
            user, equals, account = pair.partition("=")
            if not equals or not user.strip() or not account.strip():
                shown = pair if len(pair) <= 40 else pair[:40] + "…"
                raise forms.ValidationError(f"{shown!r}: write portal-user=cluster-account")
            mapped[user.strip()] = account.strip()
        return mapped


class SlurmClusterForm(forms.Form):
    ssh_host = forms.CharField(
        label="Login node (ssh)",
        required=False,
        max_length=255,
        help_text="Empty: Slurm's commands run on the portal's own machine.",
    )
    ssh_user = forms.CharField(label="ssh account", required=False, max_length=64)
    ssh_key = forms.CharField(
        label="ssh private key (path)",
        required=False,
        max_length=1024,
        help_text="A path on the portal's machine; the key itself is never stored here.",
    )
    slurm_conf = forms.CharField(
        label="slurm.conf (path)",
        required=False,
        max_length=1024,
        help_text="Empty: Slurm's default. Set for a cluster whose commands need SLURM_CONF.",
    )
    run_as = forms.CharField(
        label="Run jobs as",
        required=False,
        max_length=150,
        help_text="Empty: the portal's own account. {username} runs each job as its "
        "submitter's portal username (sbatch --uid; the portal must run as root).",
    )
    user_map = UserMapField(
        label="Accounts that differ",
        required=False,
        max_length=4000,
        help_text="portal-user=cluster-account pairs, comma-separated.",
    )
    work_dir = forms.CharField(
        label="Working folder",
        max_length=1024,
        help_text="Where jobs start and write their output (quotaportal-<Slurm job id>.out).",
    )
    pending_timeout_seconds = forms.IntegerField(
        label="Pending limit (s)",
        min_value=10,
        max_value=86400,
        help_text="A started job Slurm holds pending this long is cancelled there and waits "
        "in the portal again.",
    )
    checkpoint_signal = forms.ChoiceField(
        choices=SIGNALS,
        help_text="Sent to a preempted job's ranks first; scancel follows after the queue's "
        "grace period.",
    )


class SlurmUnitForm(forms.Form):
    partition = forms.CharField(max_length=128)
    gpu_type = forms.CharField(
        label="GPU type",
        required=False,
        max_length=64,
        help_text="As slurm.conf names it (Gres=gpu:a100:4 → a100); empty for any GPU.",
    )
    constraint = forms.CharField(
        required=False, max_length=255, help_text="sbatch --constraint: features joined by & or |."
    )
