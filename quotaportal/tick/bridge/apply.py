"""A scheduler Plan -> database rows: apply_plan writes it back with conditional updates, so a
job that changed since the snapshot (terminated, finished) is skipped instead of corrupted."""

from __future__ import annotations

from datetime import datetime

from quotaportal.infra.bulk import update_rows
from quotaportal.jobs.transitions import dispatch, preempt
from quotaportal.quotas.models import Job, JobQueue, JobStatus, QuotaShare
from quotaportal.tick.bridge.snapshot import Loaded
from scheduler import Plan


def apply_plan(
    queue: JobQueue,
    loaded: Loaded,
    plan: Plan,
    now: datetime,
    *,
    stops_at_once: bool = True,
    reasons: list[tuple[str, str]] | None = None,
) -> tuple[list[str], int]:
    """Write a plan: start jobs, preempt victims, store pending reasons.

    `stops_at_once`: a preempted attempt has stopped as soon as it is preempted (SIMULATED),
    so its preemption completes now; otherwise the backend says when it has (a LOCAL job's
    ranks exit after their grace period).

    `reasons`: changed_reasons(loaded, plan), when worked out already.

    Returns the ids of the jobs started (in plan order) and how many jobs were preempted.
    """
    started = dispatch(queue.pk, plan.dispatches, now)
    preempted = preempt(queue.pk, plan.preemptions, now, stops_at_once)
    write_pending(loaded, plan, reasons)
    return started, preempted


def changed_reasons(loaded: Loaded, plan: Plan) -> list[tuple[str, str]]:
    """(job id, reason) of each waiting job whose reason the plan changes."""
    before = loaded.pending
    return [
        (job_id, p.reason) for job_id, p in plan.pending.items() if before.get(job_id) != p.reason
    ]


def write_pending(loaded: Loaded, plan: Plan, changed: list[tuple[str, str]] | None = None) -> int:
    """Store pending reasons, touching only the rows whose reason changed (`changed`:
    changed_reasons(loaded, plan), when worked out already)."""
    if changed is None:
        changed = changed_reasons(loaded, plan)
    if changed:
        ids, reasons = zip(*changed, strict=True)
        reasons = [str(reason) for reason in reasons]
        update_rows(
            Job, list(ids), {"pending_reason": reasons}, only_if=("status", [JobStatus.RUNNABLE])
        )
    _write_share_ranks(loaded, plan)
    return len(changed)


def _write_share_ranks(loaded: Loaded, plan: Plan) -> None:
    ranks = {name: index for index, name in enumerate(plan.share_ranking)}
    changed = [
        (share_id, ranks.get(name))
        for name, share_id in loaded.share_ids.items()
        if loaded.share_ranks.get(name) != ranks.get(name)
    ]
    if changed:
        ids, ranks_now = zip(*changed, strict=True)
        update_rows(QuotaShare, list(ids), {"queue_rank": list(ranks_now)})
