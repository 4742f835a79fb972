"""Stories that make job events, and how to read what a listener received."""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import submit


def timeline(events: list[dict], job: Job) -> list[tuple[str, str]]:
    """(detail-type, status) of the events about one job, in the order they arrived."""
    arn_tail = f"service-job/{job.pk}"
    return [
        (e["detail-type"], e["detail"]["status"])
        for e in events
        if e["resources"][0].endswith(arn_tail)
    ]


def borrow_then_reclaim(people, fleet):
    """vision borrows nlp's idle half of the fleet; nlp's job takes it back (cross-share)."""
    now = timezone.now()
    own = submit(people.alice, fleet, name="own", quantity=2)
    borrower = submit(people.alice, fleet, name="borrower", quantity=2)
    run_tick(fleet.queue.id, now=now + timedelta(seconds=1))
    run_tick(fleet.queue.id, now=now + timedelta(seconds=2))  # SIMULATED: they start
    reclaimer = submit(people.bob, fleet, share="nlp", name="reclaimer", quantity=2)
    run_tick(fleet.queue.id, now=now + timedelta(seconds=3))
    return own, borrower, reclaimer


def about_job(bodies: list[str], job: Job) -> list[tuple[str, str]]:
    """(detail-type, status) of the EventBridge bodies about one job, in their order."""
    return timeline([json.loads(body) for body in bodies], job)
