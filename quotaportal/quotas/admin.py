"""Django admin: an operator's read-only window on every table.

Changes go through the services (web pages, REST API, commands) so that every write is
validated the same way, audited, and seen by the scheduler; the admin only shows.
"""

from __future__ import annotations

from django.contrib import admin

from quotaportal.quotas import models


class ReadOnly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnly, admin.ModelAdmin):
    pass


class MembershipInline(ReadOnly, admin.TabularInline):
    model = models.Membership
    extra = 0


@admin.register(models.Team)
class TeamAdmin(ReadOnlyAdmin):
    list_display = ["name"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(models.Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ["team", "user", "is_admin"]
    list_filter = ["team"]


@admin.register(models.CapacityUnit)
class CapacityUnitAdmin(ReadOnlyAdmin):
    list_display = ["name", "gpus_per_unit", "description"]


@admin.register(models.ServiceEnvironment)
class ServiceEnvironmentAdmin(ReadOnlyAdmin):
    list_display = ["name", "backend", "state", "region"]
    list_filter = ["backend", "state"]


@admin.register(models.EnvironmentCapacity)
class EnvironmentCapacityAdmin(ReadOnlyAdmin):
    list_display = ["environment", "capacity_unit", "max_capacity"]


@admin.register(models.SchedulingPolicy)
class SchedulingPolicyAdmin(ReadOnlyAdmin):
    list_display = ["name", "idle_resource_assignment_strategy"]


@admin.register(models.JobQueue)
class JobQueueAdmin(ReadOnlyAdmin):
    list_display = ["name", "priority", "state", "ordering", "service_environment", "state_version"]


@admin.register(models.TickMemo)
class TickMemoAdmin(ReadOnlyAdmin):
    list_display = ["queue", "planned_at", "fully_planned_at", "fully_planned_waiting"]


@admin.register(models.QuotaShare)
class QuotaShareAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "job_queue",
        "team",
        "sharing_strategy",
        "borrow_limit",
        "in_share_preemption",
        "state",
    ]
    list_filter = ["job_queue", "sharing_strategy", "state"]


@admin.register(models.ShareCapacityLimit)
class ShareCapacityLimitAdmin(ReadOnlyAdmin):
    list_display = ["share", "capacity_unit", "max_capacity"]


@admin.register(models.Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "id",
        "job_queue",
        "share_name",
        "status",
        "scheduling_priority",
        "quantity",
        "pending_reason",
        "created_at",
    ]
    list_filter = ["status", "job_queue", "pending_reason"]
    search_fields = ["name", "id", "share_name"]
    date_hierarchy = "created_at"
    list_select_related = ["job_queue"]


@admin.register(models.JobAttempt)
class JobAttemptAdmin(ReadOnlyAdmin):
    list_display = ["job", "number", "host", "started_at", "stopped_at", "exit_code", "preempted"]
    list_select_related = ["job", "host"]


@admin.register(models.Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ["time", "actor_name", "kind", "job", "share", "job_queue"]
    list_filter = ["kind"]
    list_select_related = ["job", "share", "job_queue"]


@admin.register(models.SchedulerRun)
class SchedulerRunAdmin(ReadOnlyAdmin):
    list_display = [
        "job_queue",
        "started_at",
        "duration_ms",
        "dispatched",
        "preempted",
        "replanned",
        "skipped",
        "error",
    ]
    list_filter = ["job_queue", "skipped", "replanned"]


@admin.register(models.UtilizationSample)
class UtilizationSampleAdmin(ReadOnlyAdmin):
    list_display = ["job_queue", "time"]
    list_filter = ["job_queue"]
