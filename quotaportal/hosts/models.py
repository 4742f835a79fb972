"""GPU hosts that run jobs for a LOCAL service environment (driven by quotaportal-agent)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class HostState(models.TextChoices):
    READY = "READY"
    DRAINING = "DRAINING"
    LOST = "LOST"


class GpuHost(models.Model):
    """A machine with `slots` instances of one capacity unit; only READY hosts add capacity.

    gpu_indices holds, per slot, the GPU indices that slot owns (gpus_per_unit of them).
    """

    name = models.CharField(max_length=128, unique=True)
    service_environment = models.ForeignKey(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="hosts"
    )
    capacity_unit = models.ForeignKey("quotas.CapacityUnit", on_delete=models.PROTECT)
    address = models.CharField(max_length=255, blank=True)  # how ranks reach rank 0
    slots = models.PositiveIntegerField(default=0)
    gpu_indices = models.JSONField(default=list, blank=True)
    state = models.CharField(max_length=8, choices=HostState.choices, default=HostState.READY)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    # The agent identity that owns this name: only its token may heartbeat and report for
    # the host, until an admin releases the host or revokes the token.
    agent_token = models.ForeignKey(
        "AgentToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="hosts"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=HostState.values), name="host_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class AgentToken(models.Model):
    """One agent identity: lets one host join a LOCAL environment. Only a SHA-256 is stored.

    A token made for a host name serves only that name; one made without binds to the first
    name it registers. Either way one token speaks for one host.
    """

    environment = models.ForeignKey(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="agent_tokens"
    )
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, blank=True)  # to tell tokens apart in lists
    host_name = models.CharField(max_length=128, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    revoked = models.BooleanField(default=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.host_name or 'unbound'})"

    @property
    def host_names(self) -> list[str]:
        return sorted(host.name for host in self.hosts.all())


class Placement(models.Model):
    """One rank of an attempt on one host: which slots (GPUs) it holds and how it ended."""

    attempt = models.ForeignKey(
        "quotas.JobAttempt", on_delete=models.CASCADE, related_name="placements"
    )
    host = models.ForeignKey(GpuHost, on_delete=models.CASCADE, related_name="placements")
    rank = models.PositiveIntegerField()
    slot_numbers = models.JSONField(default=list)
    gpu_indices = models.JSONField(default=list)
    started_at = models.DateTimeField(null=True, blank=True)
    exited_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    output_tail = models.TextField(blank=True)

    class Meta:
        ordering = ["attempt", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "rank"], name="placement_rank_unique"),
        ]
        # A host's open and recently ended placements: what runs there, when its GPUs freed.
        indexes = [models.Index(fields=["host", "exited_at"], name="placement_host_exited")]
