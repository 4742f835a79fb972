"""Reads shared by the REST API and the web pages, so both always agree."""

from __future__ import annotations

from collections import defaultdict

from django.db.models import Q, Sum

from quotaportal.quotas import bridge
from quotaportal.quotas.models import (
    DISPATCHED,
    Job,
    JobQueue,
    JobStatus,
    QuotaShare,
    ShareCapacityLimit,
)
from quotaportal.quotas.permissions import is_platform_admin, team_ids


def visible_jobs(user, queryset=None):
    """Everyone signed in may read every job (to see why theirs waits); writes are checked apart."""
    queryset = Job.objects.all() if queryset is None else queryset
    return queryset.select_related("job_queue", "quota_share", "capacity_unit", "submitted_by")


def jobs_of_user_teams(user, queryset):
    if is_platform_admin(user):
        return queryset
    return queryset.filter(Q(quota_share__team_id__in=team_ids(user)) | Q(submitted_by=user))


def share_utilization(queue: JobQueue) -> dict[str, dict[str, dict[str, int]]]:
    """Per share and unit: used, limit, borrowed (above its limit), lent (its idle capacity in
    use by borrowers) and idle. Borrowed instances are attributed first to capacity no share
    covers, then to lending shares in name order, so the figures are stable between reads.
    """
    capacity = bridge.capacity_of(queue)
    used = defaultdict(int)
    for share_id, unit, total in (
        Job.objects.filter(job_queue=queue, status__in=DISPATCHED)
        .values_list("quota_share_id", "capacity_unit__name")
        .annotate(total=Sum("quantity"))
    ):
        used[share_id, unit] = total
    shares = list(QuotaShare.objects.filter(job_queue=queue).order_by("name"))
    limits = defaultdict(dict)
    for share_id, unit, count in ShareCapacityLimit.objects.filter(
        share__job_queue=queue
    ).values_list("share_id", "capacity_unit__name", "max_capacity"):
        limits[share_id][unit] = count
    units = set(capacity) | {u for per in limits.values() for u in per}
    result: dict[str, dict[str, dict[str, int]]] = {s.name: {} for s in shares}
    for unit in sorted(units):
        borrowed_total = sum(max(0, used[s.id, unit] - limits[s.id].get(unit, 0)) for s in shares)
        uncovered = max(0, capacity.get(unit, 0) - sum(limits[s.id].get(unit, 0) for s in shares))
        to_attribute = max(0, borrowed_total - uncovered)
        for share in shares:
            limit = limits[share.id].get(unit, 0)
            use = used[share.id, unit]
            if not limit and not use:
                continue
            idle = max(0, limit - use)
            lends = share.sharing_strategy != "RESERVE" or share.state != "ENABLED"
            lent = min(idle, to_attribute) if lends else 0
            to_attribute -= lent
            result[share.name][unit] = {
                "used": use,
                "limit": limit,
                "borrowed": max(0, use - limit),
                "lent": lent,
                "idle": idle - lent,
            }
    return result


def queue_snapshot(queue: JobQueue, front: int = 100) -> dict:
    """The front of the queue, the head of each share, and utilization (AWS GetJobQueueSnapshot)."""
    runnable = Job.objects.filter(job_queue=queue, status=JobStatus.RUNNABLE)
    front_jobs = list(
        runnable.filter(position_in_queue__isnull=False)
        .order_by("position_in_queue")
        .values(
            "id", "name", "share_name", "scheduling_priority", "pending_reason", "position_in_queue"
        )[:front]
    )
    heads = {
        row["share_name"]: row
        for row in runnable.filter(position_in_share=1).values(
            "id", "name", "share_name", "scheduling_priority", "pending_reason"
        )
    }
    last_run = queue.scheduler_runs.filter(skipped=False).first()
    return {
        "job_queue": queue.name,
        "capacity": bridge.capacity_of(queue),
        "front_of_queue": front_jobs,
        "front_of_quota_shares": heads,
        "share_utilization": share_utilization(queue),
        "last_tick_at": last_run.started_at if last_run else None,
    }
