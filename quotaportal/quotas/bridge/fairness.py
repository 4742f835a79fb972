"""A queue's fair-share account between the database and the pure planner: each share's
standing for the snapshot (before planning), and the account carried on once the plan is
applied (what each share holds counts until the next tick). The account lives in
JobQueue.fair_use as scheduler.fairshare.FairUse's JSON."""

from __future__ import annotations

from datetime import datetime

from quotaportal.quotas.models import JobQueue, QuotaShare
from scheduler.fairshare import Counts, FairUse, Policy


def policy_of(queue: JobQueue) -> Policy | None:
    if queue.fair_share_half_life_seconds is None:
        return None
    weights = dict(
        QuotaShare.objects.filter(job_queue_id=queue.pk)
        .exclude(fair_share_weight=1.0)
        .values_list("name", "fair_share_weight")
    )
    return Policy(
        float(queue.fair_share_half_life_seconds), Counts(queue.fair_share_counts), weights
    )


def account_of(queue: JobQueue, policy: Policy) -> FairUse:
    return FairUse.from_json(policy, queue.fair_use)


def standing(queue: JobQueue, names, now: datetime) -> dict[str, float] | None:
    """Each share's standing now; None when the queue has no policy."""
    policy = policy_of(queue)
    if policy is None:
        return None
    return account_of(queue, policy).standing(now.timestamp(), names)


def carried_on(
    queue: JobQueue, usage: dict[str, dict[str, int]], limits: dict, now: datetime
) -> dict | None:
    """The account as of now, counting from now what each share holds after the plan
    (`usage`: share -> unit -> instances); None when the queue has no policy."""
    policy = policy_of(queue)
    if policy is None:
        return None
    account = account_of(queue, policy)
    account.standing(now.timestamp(), limits)
    account.count(usage, limits)
    return account.to_json()
