"""GPU hosts that run jobs for a LOCAL service environment (driven by quotaportal-agent)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class HostState(models.TextChoices):
    READY = "READY"
    DRAINING = "DRAINING"
    LOST = "LOST"


class GpuHost(models.Model):
    """A machine with `slots` units of one capacity unit; only READY hosts add capacity."""

    name = models.CharField(max_length=128, unique=True)
    service_environment = models.ForeignKey(
        "quotas.ServiceEnvironment", on_delete=models.CASCADE, related_name="hosts"
    )
    capacity_unit = models.ForeignKey("quotas.CapacityUnit", on_delete=models.PROTECT)
    slots = models.PositiveIntegerField(default=0)
    gpu_indices = models.JSONField(default=list, blank=True)  # per slot, the GPU indices it owns
    state = models.CharField(max_length=8, choices=HostState.choices, default=HostState.READY)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    token_hash = models.CharField(max_length=128, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=HostState.values), name="host_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name
