"""What a transaction changed, and what happens once it commits.

Services say what they changed, nothing more: a queue's plan may differ (`queue_changed`, or
`jobs_submitted` for new jobs), a job's agents must hear at once (`agents_must_hear`), a
backend's state changes by itself at an instant (`tick_due`), audit events were written and
must be published (`events_written`). Each transaction collects these
in one Changes, and when it commits the Changes acts once: an immediate tick per environment
(coalesced and spaced by requests.gate), one wake-up per environment for waiting agents
(infra.wakeups), the instants asked for. A transaction that rolls back drops its Changes with
it. This is Zulip's send_event_on_commit, with the requests merged.

Two callers see more of it, by saying so, not by flags threaded through the services:
- a tick marks the queue it is planning (`planning`): what its own writes change in that
  queue (a simulated run ends, an attempt times out) asks for no other tick, since the tick
  plans it next;
- a caller that will tick an environment itself before it commits (an agent's batch of
  reports, `holding`) gets the ticks asked for that environment's queues, and what its tick
  dispatched, to act on itself: it ticks, answers its own agent with the new work, and wakes
  the others only where its tick placed work elsewhere. If its tick fails, what it held is
  released to the commit as usual, so nothing asked for is lost.

Whether agents must hear of an ended job is for the caller that knows where its ranks run
(the LOCAL backend, a termination): the lifecycle's end of an attempt says nothing itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F

from quotaportal.infra import wakeups
from quotaportal.quotas.models import JobQueue
from quotaportal.tick import requests

log = logging.getLogger(__name__)


@dataclass
class Held:
    """What a caller that ticks an environment itself collected in its block: the queues asked
    to tick, and what its own tick dispatched."""

    env_id: int
    queue_ids: set[int] = field(default_factory=set)
    started: list[str] = field(default_factory=list)
    preempted: int = 0


@dataclass
class Changes:
    """One transaction's changes, acted on by `commit` once it has committed."""

    ticks: set[int] = field(default_factory=set)  # queue ids: an immediate tick
    wakes: set[int] = field(default_factory=set)  # environment ids: wake their agents
    due: list[tuple[int, datetime]] = field(default_factory=list)  # (queue id, instant)
    planning: set[int] = field(default_factory=set)  # queues a tick here is planning now
    held: dict[int, Held] = field(default_factory=dict)  # environment -> its caller's block
    events: bool = False  # audit events were written: publish them
    recorded: bool = False  # something waits for the commit

    def commit(self) -> None:
        """Act on what was recorded; the first of the commit callbacks does it all, the rest
        find nothing left (one is registered per change: see _recording)."""
        ticks, wakes, due = sorted(self.ticks), sorted(self.wakes), list(self.due)
        events, self.events = self.events, False
        self.ticks.clear()
        self.wakes.clear()
        self.due.clear()
        self.recorded = False
        if events and _publisher is not None:
            _publisher()
        if settings.QP_IMMEDIATE_TICKS:
            for queue_id in ticks:
                requests.enqueue_tick(queue_id)
        for env_id in wakes:
            wakeups.publish(env_id)
        for queue_id, when in due:
            requests.schedule_wake(queue_id, when)


_publisher: Callable[[], None] | None = None


def use_publisher(publish: Callable[[], None]) -> None:
    """What publishes committed audit events (the notifications app registers it), so this
    layer imports nothing above it."""
    global _publisher
    _publisher = publish


def current() -> Changes:
    """The Changes of the transaction in progress. Outside a transaction there is none to
    wait for: a fresh Changes, which `_recording` acts on at once. One whose commit callbacks
    a rollback dropped is left behind with what it recorded."""
    if not connection.in_atomic_block:
        return Changes()
    changes = getattr(connection, "_quotaportal_changes", None)
    if changes is None or (changes.recorded and not _still_pending(changes)):
        changes = connection._quotaportal_changes = Changes()
    return changes


def _still_pending(changes: Changes) -> bool:
    return any(callback == changes.commit for _, callback, _ in connection.run_on_commit)


@contextmanager
def _recording():
    """The Changes to record into; it acts once the transaction commits (at once without
    one). Each change registers the commit again, so a rollback of the savepoint one was
    made in drops only that registration, and the others still act."""
    changes = current()
    yield changes
    if connection.in_atomic_block:
        changes.recorded = True
        transaction.on_commit(changes.commit)
    else:
        changes.commit()


def queue_changed(queue_id: int) -> None:
    """What the planner sees in this queue changed (a job's priority, an end, a share, the
    capacity): bump its version, so a tick does not skip it, and tick it after commit."""
    JobQueue.objects.filter(pk=queue_id).update(state_version=F("state_version") + 1)
    _tick(queue_id)


def jobs_submitted(queue_id: int) -> None:
    """New jobs in the queue: a tick after commit, and no version bump. New jobs raise the
    queue's active-job count, which the tick compares with the version, so the next tick plans
    them; bumping the version in every submit made concurrent submits, and ticks, take turns
    on the queue's row."""
    _tick(queue_id)


def _tick(queue_id: int) -> None:
    with _recording() as changes:
        if queue_id in changes.planning:
            return  # the tick making this change plans the queue right after
        # Only a caller that ticks an environment itself needs the queue's environment.
        held = changes.held and changes.held.get(requests.environment_of(queue_id))
        if held:
            held.queue_ids.add(queue_id)
        else:
            changes.ticks.add(queue_id)


def agents_must_hear(queue_id: int) -> None:
    """A job of this queue must stop (or start) on its hosts: wake the environment's waiting
    heartbeats once this commits, rather than at their next poll."""
    env_id = requests.environment_of(queue_id)
    if env_id is not None:
        environment_work_changed(env_id)


def environment_work_changed(env_id: int) -> None:
    """What should run on some of the environment's hosts changed: wake their heartbeats."""
    with _recording() as changes:
        changes.wakes.add(env_id)


def dispatched(env_id: int, started: list[str], preempted: int) -> None:
    """A tick started or preempted jobs: their agents hear at once, unless the caller that is
    ticking the environment itself answers for them (`holding`)."""
    with _recording() as changes:
        if env_id in changes.held:
            changes.held[env_id].started.extend(started)
            changes.held[env_id].preempted += preempted
        else:
            changes.wakes.add(env_id)


def events_written() -> None:
    """Audit events were written in this transaction: once it commits, they are published
    (webhooks, e-mail). What was written is read back from the outbox, not passed here."""
    with _recording() as changes:
        changes.events = True


def tick_due(queue_id: int, when: datetime) -> None:
    """A tick of the queue's environment at `when` (a SIMULATED job starts or ends then)."""
    if settings.QP_IMMEDIATE_TICKS:
        with _recording() as changes:
            changes.due.append((queue_id, when))


@contextmanager
def planning(queue_id: int):
    """A tick plans this queue in this block: its own changes to it ask for no other tick."""
    changes = current()
    changes.planning.add(queue_id)
    try:
        yield
    finally:
        changes.planning.discard(queue_id)


@contextmanager
def holding(env_id: int):
    """The caller ticks this environment itself before it commits: the ticks asked for its
    queues in this block, and what its tick dispatches, are the caller's (the Held yielded),
    not the commit's. See run.tick_held."""
    changes = current()
    held = changes.held.setdefault(env_id, Held(env_id))
    try:
        yield held
    finally:
        changes.held.pop(env_id, None)


def release(held: Held) -> None:
    """The caller's own tick did not run: what it held goes to the commit after all."""
    with _recording() as changes:
        changes.ticks.update(held.queue_ids)
    held.queue_ids.clear()
    held.started.clear()
    held.preempted = 0
