"""Rows -> scheduler.accounting's inputs for one queue over [start, end): its attempts, its
shares' terms through time (rebuilt from the audit log's share changes), the jobs' RUNNABLE
stretches, and the environment's capacity."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from quotaportal.jobs.transitions import PREEMPTION_REASONS
from quotaportal.quotas.models import (
    FINAL,
    Event,
    EventKind,
    Job,
    JobAttempt,
    JobQueue,
    JobStatus,
    QuotaShare,
)
from quotaportal.tick import bridge
from quotaportal.tick.bridge import timestamp
from scheduler.accounting import Attempt, Terms, Waiting

NO_TEAM = "(deleted share)"
EARLIEST = float("-inf")


@dataclass
class QueueInputs:
    attempts: list[Attempt]
    terms: list[Terms]
    waiting: list[Waiting]
    capacity: dict[str, int]


# The reason a preemption writes on the attempt it stops (AWS's own texts, which the sync
# brings back too) -> its kind; another reason is a cross-share preemption, AWS's usual one.
KIND_OF_REASON = {reason: kind.value for kind, reason in PREEMPTION_REASONS.items()}


def preemption_kind(status_reason: str) -> str:
    return KIND_OF_REASON.get(status_reason, "cross_share")


def load(queue: JobQueue, start: datetime, end: datetime, reach: timedelta) -> QueueInputs:
    """`reach`: no closed attempt started longer than this before `start` reaches into it."""
    shares = list(
        QuotaShare.objects.filter(job_queue=queue).select_related("team").order_by("name")
    )
    teams = {s.name: s.team.name for s in shares}
    attempt_rows = _attempt_rows(queue, start, end, reach)
    return QueueInputs(
        attempts=[_attempt(queue, row, teams) for row in attempt_rows],
        terms=_terms(queue, shares),
        waiting=_waiting(queue, start, end, attempt_rows, teams),
        capacity=bridge.environment_limits(queue.service_environment),
    )


ATTEMPT_FIELDS = (
    "job_id",
    "number",
    "started_at",
    "stopped_at",
    "preempted",
    "status_reason",
    "job__share_name",
    "job__submitted_by__username",
    "job__capacity_unit__name",
    "job__capacity_unit__gpus_per_unit",
    "job__quantity",
    "job__scheduling_priority",
    "job__created_at",
)


def _attempt_rows(queue: JobQueue, start: datetime, end: datetime, reach) -> list[dict]:
    # The open attempts (their partial index) and those started within reach (by start).
    overlapping = Q(stopped_at__isnull=True) | Q(
        started_at__gte=start - reach, stopped_at__gt=start
    )
    return list(
        JobAttempt.objects.filter(overlapping, job__job_queue=queue, started_at__lt=end)
        .order_by()
        .values(*ATTEMPT_FIELDS)
    )


def _attempt(queue: JobQueue, row: dict, teams: dict[str, str]) -> Attempt:
    share = row["job__share_name"]
    unit = row["job__capacity_unit__name"]
    user = row["job__submitted_by__username"] or ""
    return Attempt(
        job=str(row["job_id"]),
        key=(queue.name, share, teams.get(share, NO_TEAM), user, unit),
        share=share,
        unit=unit,
        quantity=row["job__quantity"],
        gpus_per_instance=row["job__capacity_unit__gpus_per_unit"],
        priority=row["job__scheduling_priority"],
        created_at=timestamp(row["job__created_at"]),
        started_at=timestamp(row["started_at"]),
        stopped_at=timestamp(row["stopped_at"]),
        preempted=preemption_kind(row["status_reason"]) if row["preempted"] else "",
        first=row["number"] == 1,
    )


def _terms(queue: JobQueue, shares: list[QuotaShare]) -> list[Terms]:
    """Each share's terms through time: today's, and before each recorded change the values
    it replaced. A deleted share has none (its jobs' use counts as own)."""
    changes = defaultdict(list)
    events = Event.objects.filter(
        kind=EventKind.SHARE_CHANGED, share__in=shares, job_queue=queue
    ).order_by("-time", "-id")
    for share_id, time, detail in events.values_list("share_id", "time", "detail"):
        changes[share_id].append((time, detail.get("changes", {})))
    limits_of = bridge.share_limits(queue)  # every share's, in one query
    result = []
    for share in shares:
        values = {
            "sharing_strategy": share.sharing_strategy,
            "borrow_limit": share.borrow_limit,
            "in_share_preemption": share.in_share_preemption,
            "state": share.state,
        }
        limits = dict(limits_of.get(share.pk, {}))
        key = (queue.name, share.name, share.team.name, "")
        for time, changed in changes[share.pk]:  # newest first
            result.append(Terms(_share(share.name, values, limits), timestamp(time), key))
            for field, (before, _after) in changed.items():
                if field == "capacity_limits":
                    limits = before
                elif field in values:
                    values[field] = before
        result.append(Terms(_share(share.name, values, limits), EARLIEST, key))
    return sorted(result, key=lambda t: t.since)


def _share(name: str, values: dict, limits: dict):
    return bridge.scheduler_share(
        name,
        limits,
        values["sharing_strategy"],
        values["borrow_limit"],
        values["in_share_preemption"],
        values["state"],
    )


def _waiting(
    queue: JobQueue, start: datetime, end: datetime, attempts: list[dict], teams: dict[str, str]
) -> list:
    """The RUNNABLE stretches of the jobs that may have waited in the period: those with an
    attempt in it, those submitted in it and those waiting now."""
    candidates = (
        Job.objects.filter(job_queue=queue, created_at__lt=end)
        .filter(
            Q(pk__in={row["job_id"] for row in attempts})
            | Q(created_at__gte=start)
            | Q(status=JobStatus.RUNNABLE)
        )
        .order_by()
        .values(
            "id",
            "share_name",
            "capacity_unit__name",
            "created_at",
            "status",
            "stopped_at",
            "submitted_by__username",
        )
    )
    jobs = {row["id"]: row for row in candidates}
    starts = defaultdict(list)
    for job_id, started, stopped in (
        JobAttempt.objects.filter(job_id__in=list(jobs))
        .order_by("job_id", "number")
        .values_list("job_id", "started_at", "stopped_at")
    ):
        starts[job_id].append((started, stopped))
    waiting = []
    for job_id, job in jobs.items():
        share, unit = job["share_name"], job["capacity_unit__name"]
        key = (
            queue.name,
            share,
            teams.get(share, NO_TEAM),
            job["submitted_by__username"] or "",
            unit,
        )
        for begin, until in _runnable_stretches(job, starts[job_id]):
            waiting.append(Waiting(share, unit, timestamp(begin), timestamp(until), key))
    return waiting


def _runnable_stretches(job: dict, attempts: list[tuple]) -> list[tuple]:
    """(from, to) while the job was RUNNABLE; `to` None while it still is."""
    stretches, since = [], job["created_at"]
    for started, stopped in attempts:
        if started > since:
            stretches.append((since, started))
        since = stopped
        if since is None:
            return stretches  # dispatched now
    if job["status"] in FINAL:
        if job["stopped_at"] and job["stopped_at"] > since:
            stretches.append((since, job["stopped_at"]))  # ended while waiting (terminated)
    elif job["status"] == JobStatus.RUNNABLE:
        stretches.append((since, None))
    return stretches
