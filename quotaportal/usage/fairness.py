"""A queue's fair-share policy switched on with its past: each share's decayed use seeded from
the hourly usage rows, so the first tick already knows who borrowed most last week.

The rows are hours rolled up so far (the hour running now and any not yet rolled are left
out: at most a couple of hours, which a half-life of days barely notices). Each hour counts as
used at its middle and decays from there (scheduler.fairshare's formula)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.utils import timezone

from quotaportal.quotas.models import JobQueue, WhatIf
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services import fairness
from quotaportal.usage.models import HOUR, UsageHour
from quotaportal.whatif import runs as whatif
from scheduler.fairshare import Counts, decay_factor

# Past use older than this many half-lives is below 0.4 % of what it was: not read.
HALF_LIVES_READ = 8
FIGURE_COUNTED = {
    Counts.BORROWED: "borrowed_instance_seconds",
    Counts.ALL: "instance_seconds",
}


def seed(queue: JobQueue, half_life_seconds: int, counts: str, now: datetime) -> dict:
    """Share name -> decayed use (instance-seconds) as of `now`, from the rolled-up hours."""
    figure = FIGURE_COUNTED[Counts(counts)]
    since = now - timedelta(seconds=HALF_LIVES_READ * half_life_seconds)
    rows = UsageHour.objects.filter(
        job_queue=queue.name, span=HOUR, hour__gte=since, hour__lt=now
    ).values_list("quota_share", "hour", figure)
    used: dict[str, float] = defaultdict(float)
    for share, hour, seconds in rows.iterator(chunk_size=5000):
        if seconds:
            middle = hour + timedelta(minutes=30)
            used[share] += seconds * decay_factor((now - middle).total_seconds(), half_life_seconds)
    return dict(used)


def set_policy(
    actor, queue: JobQueue, *, half_life_seconds: int | None, counts: str = Counts.BORROWED
) -> JobQueue:
    """Switch the queue's fair-share policy on (seeded with its past), change it, or off."""
    now = timezone.now()
    return fairness.set_fair_share(
        actor,
        queue,
        half_life_seconds=half_life_seconds,
        counts=counts,
        seed=_past_if_switched_on(queue, half_life_seconds, counts, now),
        now=now,
    )


def apply_what_if(actor, what_if: WhatIf) -> None:
    """Apply a what-if's draft; a fair-share policy it switches on starts from the past."""
    require_admin(actor, "apply what-if drafts")
    fair = what_if.draft.get("fair_share") or {}
    past = _past_if_switched_on(
        what_if.job_queue,
        fair.get("half_life_seconds"),
        fair.get("counts", Counts.BORROWED),
        timezone.now(),
    )
    whatif.apply_what_if(actor, what_if, fair_share_seed=past)


def _past_if_switched_on(queue: JobQueue, half_life, counts, now: datetime) -> dict | None:
    """The seed of a valid policy that switches the queue's on; None otherwise (a policy
    already on keeps its account; a bad one is refused by the service with its message)."""
    switched_on = half_life is not None and queue.fair_share_half_life_seconds is None
    if switched_on and not fairness.policy_errors(half_life, counts):
        return seed(queue, half_life, counts, now)
    return None
