"""Writing the audit log: every service that changes state records who did it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.utils import timezone

from quotaportal.infra.bulk import insert_new
from quotaportal.quotas.models import Event, EventKind
from quotaportal.quotas.permissions import actor_name
from quotaportal.tick import changes

# The events insert_events holds back until the end of an `events_together` block.
_held: ContextVar[list[Event] | None] = ContextVar("held_events", default=None)


@contextmanager
def events_together() -> Iterator[None]:
    """The system events this block inserts are stored in one statement as it ends (a batch
    of reports' starts and exits: one COPY where each kind of change made its own), in the
    order they came; an event recorded one by one meanwhile stores those before it first.
    Nothing in the block reads them back; a block that raises stores none."""
    held: list[Event] = []
    token = _held.set(held)
    try:
        yield
    finally:
        _held.reset(token)
    insert_events(held)


def _store_held() -> None:
    if held := _held.get():
        _insert_now(held)
        held.clear()


def record(actor, kind: str, *, job=None, share=None, queue=None, when=None, **detail) -> Event:
    _store_held()  # the events before it keep their order
    changes.events_written()
    return Event.objects.create(
        time=when or timezone.now(),
        actor=actor,
        actor_name=actor_name(actor),
        kind=kind,
        job=job,
        share=share,
        job_queue=queue
        or (job.job_queue if job is not None else getattr(share, "job_queue", None)),
        detail=detail,
    )


def event_row(
    kind: str, *, job_id=None, queue_id=None, share_id=None, when=None, **detail
) -> Event:
    """An unsaved system event, for `insert_events`."""
    return Event(
        time=when or timezone.now(),
        actor=None,
        actor_name="system",
        kind=kind,
        job_id=job_id,
        job_queue_id=queue_id,
        share_id=share_id,
        detail=detail,
    )


def insert_events(events: list[Event]) -> None:
    """Store many events at once (a tick's, a batch submit's); they are published after commit.
    Inside `events_together`, they wait for the block's end."""
    if (held := _held.get()) is not None:
        held.extend(events)
    else:
        _insert_now(events)


def _insert_now(events: list[Event]) -> None:
    if events:
        insert_new(events)
        changes.events_written()


def preemption_completed(job, queue_id: int, when, requeued: bool = False) -> Event:
    """The preempted attempt has stopped: its preemption is over (AWS's "Preemption
    Completed"), with the job's preemption record as it stands. `requeued`: the job waited
    for this, shown RUNNING, and is RUNNABLE from now on."""
    return event_row(
        EventKind.PREEMPTION_COMPLETED,
        job_id=job.pk,
        queue_id=queue_id,
        share_id=job.quota_share_id,
        when=when,
        preempted_count=job.preempted_count,
        requeued=requeued,
    )
