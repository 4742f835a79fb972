"""Each share's fair-share standing as people read it (the share pages, REST, `qp shares`),
and why a borrower waits under the policy: "QS1 has borrowed 41.0 instance-hours …, more
than QS4 with 3.0: QS4 borrows first."

A standing is the share's decayed past use (instance-seconds, scheduler.fairshare) over its
weight, shown in instance-hours; it is read from the account the last tick left
(TickMemo.fair_use) and decayed to now."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from quotaportal.quotas import selectors
from quotaportal.quotas.models import JobQueue, QuotaShare
from quotaportal.tick.bridge import fairness
from scheduler.fairshare import Counts

_SPANS = ((86_400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def half_life_words(seconds: int) -> str:
    """'7 days', '12 hours', '90 seconds': the largest span that divides it."""
    for span, name in _SPANS:
        if seconds % span == 0:
            count = seconds // span
            return f"{count} {name}{'s' if count != 1 else ''}"
    return f"{seconds} seconds"


def share_standings(queue: JobQueue, now: datetime | None = None) -> dict[str, float] | None:
    """Share name -> standing in instance-hours per unit of weight; None without a policy."""
    if queue.fair_share_half_life_seconds is None:
        return None
    names = QuotaShare.objects.filter(job_queue_id=queue.pk).values_list("name", flat=True)
    found = fairness.standing(queue, list(names), now or timezone.now())
    return {name: value / 3600 for name, value in found.items()}


def borrows_first_words(queue: JobQueue, now: datetime | None = None) -> dict[str, str]:
    """For each share with a lower-standing share borrowing now: the sentence that says why
    that one borrows first. Empty without a policy."""
    standings = share_standings(queue, now)
    if not standings:
        return {}
    borrowing = {
        name
        for name, units in selectors.share_utilization(queue).items()
        if any(figures["borrowed"] for figures in units.values())
    }
    verb = "borrowed" if queue.fair_share_counts == Counts.BORROWED else "used"
    weighted = (
        " per unit of weight"
        if QuotaShare.objects.filter(job_queue_id=queue.pk).exclude(fair_share_weight=1).exists()
        else ""
    )
    halves = half_life_words(queue.fair_share_half_life_seconds)
    words = {}
    for name, standing in standings.items():
        below = [(standings[other], other) for other in borrowing if standings[other] < standing]
        if not below:
            continue
        first_standing, first = min(below)
        words[name] = (
            f"{name} has {verb} {standing:,.1f} instance-hours{weighted} (past use halves "
            f"every {halves}), more than {first} with {first_standing:,.1f}: {first} borrows "
            "first."
        )
    return words


def waiting_reason(job, words: dict) -> str | None:
    """Why a RUNNABLE job whose share may borrow waits under the fair-share policy; None
    otherwise. `words` (queue id -> borrows_first_words) lets a list read each queue once."""
    if job.shown_status != "RUNNABLE" or job.pending_reason != "NOTHING_TO_BORROW":
        return None
    if job.job_queue_id not in words:
        words[job.job_queue_id] = borrows_first_words(job.job_queue)
    return words[job.job_queue_id].get(job.quota_share.name)
