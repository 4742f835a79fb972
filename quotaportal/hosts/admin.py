"""Django admin for GPU hosts (read-only, like every table; see quotas.admin)."""

from __future__ import annotations

from django.contrib import admin

from quotaportal.hosts.models import GpuHost
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
    exclude = ["token_hash"]
