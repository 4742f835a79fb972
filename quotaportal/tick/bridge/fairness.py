"""A queue's fair-share account between the database and the pure planner: each share's
standing for the snapshot (before planning), and the account carried on once the plan is
applied (what each share holds counts until the next tick). The account lives in
TickMemo.fair_use as scheduler.fairshare.FairUse's JSON."""

from __future__ import annotations

from datetime import datetime

from quotaportal.quotas.models import JobQueue, QuotaShare, TickMemo
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
    return FairUse.from_json(policy, TickMemo.of(queue).fair_use)


def standing(queue: JobQueue, names, now: datetime) -> dict[str, float] | None:
    """Each share's standing now; None when the queue has no policy."""
    account = opened(queue, now)
    return None if account is None else account.standing(now.timestamp(), names)


def opened(queue: JobQueue, now: datetime) -> FairUse | None:
    """The queue's account brought to now, for one tick; None when it has no policy."""
    policy = policy_of(queue)
    if policy is None:
        return None
    account = account_of(queue, policy)
    account.standing(now.timestamp(), list(account.used))
    return account


def carried_on(account: FairUse | None, usage: dict[str, dict[str, int]], snapshot) -> dict:
    """The memo's fair_use once a tick's plan is applied: the account, counting from now
    what each share holds (`usage`: share -> unit -> instances); {} without a policy."""
    if account is None:
        return {}
    limits = {share.name: share.limits for share in snapshot.shares}
    account.forget_all_but(limits)  # a deleted share's past goes with it
    account.count(usage, limits)
    return {"fair_use": account.to_json()}
