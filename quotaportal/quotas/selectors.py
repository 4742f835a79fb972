"""Reads shared by the REST API and the web pages, so both always agree."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import UTC, datetime

from django.db.models import Count, F, Max, OuterRef, Q, Subquery, Sum, Window
from django.db.models.functions import Coalesce, Greatest, RowNumber

from quotaportal.infra.subqueries import per_outer_row
from quotaportal.quotas.backends import backend_for
from quotaportal.quotas.models import (
    DISPATCHED,
    Job,
    JobQueue,
    JobStatus,
    QuotaShare,
    Reservation,
    ShareCapacityLimit,
)
from quotaportal.quotas.permissions import is_platform_admin, team_ids
from quotaportal.tick import bridge
from scheduler.positions import QueueNumbering
from scheduler.reservations import Reservation as PlannedReservation
from scheduler.reservations import capacity_at, changes_after
from scheduler.utilization import share_breakdown

# RUNNABLE jobs in line: not a preempted job whose ranks still stop (the planner leaves
# it out until they have, Job.preemption_stopping).
WAITING = {"status": JobStatus.RUNNABLE, "preemption_stopping": False}


def visible_jobs(user, queryset=None):
    """Everyone signed in may read every job (to see why theirs waits); writes are checked apart."""
    queryset = Job.objects.all() if queryset is None else queryset
    return queryset.select_related(
        "job_queue__service_environment", "quota_share", "capacity_unit", "submitted_by"
    )


def array_counts(array_ids) -> dict:
    """Per job array, its children by the status people see (every status, 0 included):
    one grouped read for a whole page of arrays."""
    counts = {pk: dict.fromkeys(JobStatus.values, 0) for pk in array_ids}
    rows = (
        Job.objects.filter(array_id__in=list(counts))
        .values_list("array_id", "status", "preemption_stopping")
        .annotate(n=Count("id"))
        .order_by()
    )
    for array_id, status, stopping, n in rows:
        shown = JobStatus.RUNNING if stopping and status == JobStatus.RUNNABLE else status
        counts[array_id][shown] += n
    return counts


def dependencies(job: Job) -> list[dict]:
    """What a job waits (or waited) for: each job, its kind and its status now."""
    if not job.depends_on:
        return []
    found = Job.objects.in_bulk([d["job_id"] for d in job.depends_on])
    return [
        {"job": found.get(uuid.UUID(d["job_id"])), "job_id": d["job_id"], "type": d["type"]}
        for d in job.depends_on
    ]


def jobs_of_user_teams(user, queryset):
    if is_platform_admin(user):
        return queryset
    return queryset.filter(Q(quota_share__team_id__in=team_ids(user)) | Q(submitted_by=user))


def share_utilization(
    queue: JobQueue, shares=None, capacity=None
) -> dict[str, dict[str, dict[str, int]]]:
    """Per share and unit: used, limit, borrowed, lent, idle and short, as
    scheduler.utilization.share_breakdown attributes them (the simulator's reports too)."""
    capacity = bridge.capacity_of(queue) if capacity is None else capacity
    used: dict[str, dict[str, int]] = defaultdict(dict)
    for share_name, unit, total in (
        Job.objects.filter(job_queue=queue, status__in=DISPATCHED)
        .values_list("quota_share__name", "capacity_unit__name")
        .annotate(total=Sum("quantity"))
    ):
        used[share_name][unit] = total
    if shares is None:
        shares = list(QuotaShare.objects.filter(job_queue=queue).order_by("name"))
    limits = bridge.share_limits(queue)
    return share_breakdown(
        [bridge.share_of(share, limits.get(share.id, {})) for share in shares], used, capacity
    )


def overcommitted_units(queue: JobQueue) -> list[str]:
    """Units whose ENABLED share limits add up to more than the environment's capacity now
    (reservations included): allowed (AWS allows it), but every share cannot have its whole
    limit at once, so say so."""
    totals = dict(
        ShareCapacityLimit.objects.filter(share__job_queue=queue, share__state="ENABLED")
        .values_list("capacity_unit__name")
        .annotate(total=Sum("max_capacity"))
    )
    return overcommitted_words(totals, bridge.capacity_now(queue.service_environment))


def overcommitted_words(totals: dict[str, int], capacity: dict[str, int]) -> list[str]:
    """Each unit whose limits' `totals` exceed `capacity`, as words."""
    return [
        f"limits on {unit} total {total} on {capacity.get(unit, 0)} instance"
        f"{'s' if capacity.get(unit, 0) != 1 else ''}"
        for unit, total in sorted(totals.items())
        if total > capacity.get(unit, 0)
    ]


def _ahead_in_share():
    """Correlated count of RUNNABLE jobs ahead of the outer job in its share's order."""
    same = Job.objects.filter(quota_share_id=OuterRef("quota_share_id"), **WAITING)
    prio, created = OuterRef("scheduling_priority"), OuterRef("created_at")
    ahead = same.filter(
        Q(scheduling_priority__gt=prio)
        | Q(scheduling_priority=prio, created_at__lt=created)
        | Q(scheduling_priority=prio, created_at=created, id__lt=OuterRef("id"))
    )
    return Coalesce(per_outer_row(ahead, Count("*"), by="quota_share_id"), 0)


def heads_waiting_since(queue: JobQueue, cutoff):
    """RUNNABLE jobs that head their share and have waited since before `cutoff` (since they
    were submitted, or since their last attempt stopped)."""
    last_stop = Max("attempts__stopped_at")
    return (
        Job.objects.filter(job_queue=queue, quota_share__isnull=False, **WAITING)
        .annotate(waiting_since=Greatest("created_at", Coalesce(last_stop, "created_at")))
        .filter(waiting_since__lte=cutoff)
        .annotate(ahead=_ahead_in_share())
        .filter(ahead=0)
    )


def _numberings(queue_ids) -> dict[int, tuple[QueueNumbering, dict[int, int]]]:
    """Per queue: the numbering of its RUNNABLE jobs and each share's index in rank order."""
    counts = dict(
        Job.objects.filter(job_queue_id__in=queue_ids, **WAITING)
        .values_list("quota_share_id")
        .annotate(n=Count("id"))
    )
    shares = defaultdict(list)
    for share_id, queue_id, rank, name in QuotaShare.objects.filter(
        job_queue_id__in=queue_ids
    ).values_list("id", "job_queue_id", "queue_rank", "name"):
        if counts.get(share_id):
            # Shares that gained jobs since the last tick have no rank yet: they come last.
            shares[queue_id].append((rank is None, rank or 0, name, share_id))
    result = {}
    for queue_id, entries in shares.items():
        entries.sort()
        order = [entry[3] for entry in entries]
        result[queue_id] = (
            QueueNumbering([counts[s] for s in order]),
            {s: i for i, s in enumerate(order)},
        )
    return result


def job_positions(jobs) -> dict:
    """job id -> (position_in_share, position_in_queue) for the RUNNABLE ones, in 3 queries.

    The scheduler runs beside every read: a job may start (or others may) between the page's
    query and these. A job that is no longer RUNNABLE, or whose place the counts no longer
    hold, has no position in this answer rather than a wrong one or an error.
    """
    runnable = [j for j in jobs if j.shown_status == JobStatus.RUNNABLE and j.quota_share_id]
    if not runnable:
        return {}
    ahead = dict(
        Job.objects.filter(pk__in=[j.pk for j in runnable], **WAITING)
        .annotate(ahead=_ahead_in_share())
        .values_list("pk", "ahead")
    )
    numberings = _numberings({j.job_queue_id for j in runnable})
    positions = {}
    for job in runnable:
        numbering, rank = numberings.get(job.job_queue_id, (None, {}))
        if job.pk not in ahead or job.quota_share_id not in rank:
            continue
        in_share = ahead[job.pk] + 1
        in_queue = numbering.position(rank[job.quota_share_id], in_share)
        if in_queue is not None:
            positions[job.pk] = (in_share, in_queue)
    return positions


def queue_snapshot(queue: JobQueue, front: int = 100) -> dict:
    """The front of the queue, the head of each share, and utilization (AWS GetJobQueueSnapshot)."""
    in_share = Window(
        RowNumber(),
        partition_by=[F("quota_share_id")],
        order_by=[F("scheduling_priority").desc(), F("created_at").asc(), F("id").asc()],
    )
    leading = list(
        Job.objects.filter(job_queue=queue, quota_share__isnull=False, **WAITING)
        .annotate(in_share=in_share)
        .filter(in_share__lte=front)
        .values(
            "id",
            "name",
            "share_name",
            "quota_share_id",
            "scheduling_priority",
            "pending_reason",
            "in_share",
        )
    )
    numbering, rank = _numberings([queue.id]).get(queue.id, (None, {}))
    for row in leading:
        share_index = rank.get(row.pop("quota_share_id"))
        # A share emptied since the first read has no numbering: such rows sort last.
        row["position_in_queue"] = (
            numbering.position(share_index, row["in_share"]) if share_index is not None else None
        )
        row["position_in_share"] = row.pop("in_share")
    leading.sort(key=lambda row: (row["position_in_queue"] is None, row["position_in_queue"] or 0))
    last_run = queue.scheduler_runs.filter(skipped=False).first()
    return {
        "job_queue": queue.name,
        "capacity": bridge.capacity_of(queue),
        "front_of_queue": leading[:front],
        "front_of_quota_shares": {
            r["share_name"]: r for r in leading if r["position_in_share"] == 1
        },
        "share_utilization": share_utilization(queue),
        "last_tick_at": last_run.started_at if last_run else None,
    }


def environment_capacity(env, now) -> dict:
    """The environment's capacity now ("now": per unit, what the planner uses), and where its
    settings allow more than its backend can use ("allowed": per unit, e.g. a reservation
    beyond a LOCAL environment's READY hosts), with what the backend counts ("source")."""
    allowed = bridge.allowed_capacity(env, now)
    usable = bridge.usable_capacity(env, allowed)
    return {
        "now": usable,
        "allowed": {u: n for u, n in allowed.items() if n > usable.get(u, 0)},
        "source": backend_for(env).capacity_source,
    }


def connection_health(env) -> dict | None:
    """A remote environment's connection ({"name": "Slurm", "state": its ConnectionHealth
    row, None before the first try, "notes": what its backend adds in words}); None for one
    with no remote end."""
    backend = backend_for(env)
    if not backend.remote_name:
        return None
    return {
        "name": backend.remote_name,
        "state": backend.health(env),
        "notes": backend.health_notes(env),
    }


def upcoming_capacity_changes(env, now, limit: int = 10) -> list[dict]:
    """The next instants the environment's capacity changes (reservations starting or ending),
    with the capacity per unit from then on, for the dashboard and the environment page."""
    rows = list(
        Reservation.objects.filter(environment=env, ends_at__gt=now).values_list(
            "name", "capacity_unit__name", "instances", "starts_at", "ends_at"
        )
    )
    if not rows:
        return []
    windows = [
        PlannedReservation(name, unit, n, start.timestamp(), end.timestamp())
        for name, unit, n, start, end in rows
    ]
    base = bridge.environment_limits(env)
    # Changes at one instant (a reservation ends as the next starts) are one change: two
    # lines would both show the capacity after both.
    by_instant: dict[float, list[str]] = {}
    for when, what in changes_after(windows, now.timestamp()):
        by_instant.setdefault(when, []).append(what)
    source = backend_for(env).capacity_source
    before = bridge.capacity_now(env, now)
    changes = []
    for when, whats in list(by_instant.items())[:limit]:
        allowed = capacity_at(base, windows, when)
        # What the backend can use then, as far as is known now (LOCAL: today's READY hosts).
        capacity = bridge.usable_capacity(env, allowed)
        units = [
            {
                "unit": unit,
                "before": before.get(unit, 0),
                "after": count,
                "held_by_backend": allowed.get(unit, 0) > count
                or capacity_at(base, windows, when - 1).get(unit, 0) > before.get(unit, 0),
            }
            for unit, count in capacity.items()
        ]
        changes.append(
            {
                "time": datetime.fromtimestamp(when, UTC),
                "what": "; ".join(whats),
                "capacity": capacity,
                "units": units,
                "source": source,
            }
        )
        before = capacity
    return changes


def fleet_overview() -> list[dict]:
    """Every service environment with its queues: capacity, and per queue the instances used,
    borrowed and lent, the jobs waiting, and why the longest-waiting one waits. The waiting
    figures come with the queues, in one statement."""
    runnable = Job.objects.filter(job_queue=OuterRef("pk"), status=JobStatus.RUNNABLE)
    oldest = runnable.order_by("created_at")
    queues = (
        JobQueue.objects.select_related("service_environment")
        .annotate(
            waiting=Coalesce(per_outer_row(runnable, Count("id"), by="job_queue"), 0),
            longest_since=Subquery(oldest.values("created_at")[:1]),
            longest_reason=Subquery(oldest.values("pending_reason")[:1]),
        )
        .order_by("service_environment__name", "name")
    )
    environments: dict[int, dict] = {}
    for queue in queues:
        env = queue.service_environment
        if env.pk not in environments:
            environments[env.pk] = {
                "environment": env,
                "capacity": bridge.capacity_now(env),
                "connection": connection_health(env),
                "queues": [],
            }
        environments[env.pk]["queues"].append(_queue_overview(queue, bridge.capacity_of(queue)))
    return list(environments.values())


def _queue_overview(queue: JobQueue, capacity: dict[str, int]) -> dict:
    used = dict.fromkeys(capacity, 0)  # every unit of the capacity, and any other in use
    borrowed = lent = 0
    for units in share_utilization(queue, capacity=capacity).values():
        for unit, figures in units.items():
            used[unit] = used.get(unit, 0) + figures["used"]
            borrowed += figures["borrowed"]
            lent += figures["lent"]
    return {
        "queue": queue,
        "used": used,
        "borrowed": borrowed,
        "lent": lent,
        "waiting": queue.waiting,
        "longest_reason": queue.longest_reason or "",
        "longest_since": queue.longest_since,
    }
