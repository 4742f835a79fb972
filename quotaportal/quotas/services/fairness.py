"""A job queue's fair-share policy (scheduler.fairshare): switched on with a half-life and
what counts, off again, and each share's standing as the tick last left it.

Switching it on may seed each share's decayed use from what it used before (the usage
rollups: quotaportal.usage.fairness reads them, above this layer); from then on every tick
keeps the account (bridge.fairness)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from quotaportal.quotas.audit import record
from quotaportal.quotas.backends import self_scheduling_backends
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import EventKind, JobQueue, TickMemo
from quotaportal.quotas.permissions import require_admin
from quotaportal.tick.changes import queue_changed
from scheduler.fairshare import Counts

MAX_HALF_LIFE = 10 * 365 * 86_400


def policy_errors(half_life_seconds, counts) -> dict[str, str]:
    errors = {}
    if half_life_seconds is not None and (
        isinstance(half_life_seconds, bool)
        or not isinstance(half_life_seconds, int)
        or not 1 <= half_life_seconds <= MAX_HALF_LIFE
    ):
        errors["fair_share_half_life_seconds"] = (
            f"a half-life is a whole number of seconds from 1 to {MAX_HALF_LIFE:,} "
            "(10 years), or empty for no fair-share policy"
        )
    if counts not in {c.value for c in Counts}:
        errors["fair_share_counts"] = "counts is borrowed or all"
    return errors


@transaction.atomic
def set_fair_share(
    actor,
    queue: JobQueue,
    *,
    half_life_seconds: int | None,
    counts: str = Counts.BORROWED,
    seed: dict[str, float] | None = None,
    now=None,
) -> JobQueue:
    """Switch the queue's policy on (a half-life), change it, or off (None). `seed` (share
    name -> decayed use as of `now`, by default this moment) starts the account when it is
    switched on."""
    require_admin(actor, "change job queues")
    if errors := policy_errors(half_life_seconds, counts):
        raise InvalidInput(errors)
    queue = (
        JobQueue.objects.select_related("service_environment").select_for_update().get(pk=queue.pk)
    )
    backend = queue.service_environment.backend
    if half_life_seconds is not None and backend in self_scheduling_backends():
        raise InvalidInput(
            {
                "fair_share_half_life_seconds": f"a {backend} environment's own scheduler "
                "orders its jobs, so a fair-share policy would change nothing there; it "
                "applies to queues the portal plans (SIMULATED, LOCAL, SLURM)"
            }
        )
    was_on = queue.fair_share_half_life_seconds is not None
    queue.fair_share_half_life_seconds, queue.fair_share_counts = half_life_seconds, counts
    fair_use = None  # a policy changed while on keeps its account
    if half_life_seconds is None:
        fair_use = {}
    elif not was_on:
        at = (now or timezone.now()).timestamp()
        fair_use = {name: [float(value), at, 0.0] for name, value in (seed or {}).items()}
    queue.save(update_fields=["fair_share_half_life_seconds", "fair_share_counts"])
    if fair_use is not None:
        TickMemo.objects.remember(queue.pk, fair_use=fair_use)
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action="updated",
        resource="job queue",
        name=queue.name,
        changes={
            "fair_share_half_life_seconds": str(half_life_seconds),
            "fair_share_counts": counts,
        },
    )
    queue_changed(queue.pk)
    return queue
