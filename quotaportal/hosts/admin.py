"""Django admin for GPU hosts (read-only, like every table; see quotas.admin)."""

from __future__ import annotations

from django.contrib import admin

from quotaportal.hosts.models import AgentToken, GpuHost, Placement
from quotaportal.quotas.admin import ReadOnlyAdmin


@admin.register(GpuHost)
class GpuHostAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "service_environment",
        "capacity_unit",
        "slots",
        "state",
        "last_heartbeat",
    ]
    list_filter = ["state", "service_environment"]


@admin.register(AgentToken)
class AgentTokenAdmin(ReadOnlyAdmin):
    list_display = ["environment", "created_at", "revoked"]
    exclude = ["key_hash"]


@admin.register(Placement)
class PlacementAdmin(ReadOnlyAdmin):
    list_display = [
        "attempt",
        "host",
        "rank",
        "gpu_indices",
        "exit_code",
        "started_at",
        "exited_at",
    ]
    list_select_related = ["attempt", "host"]
