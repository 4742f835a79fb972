"""Asking for ticks: at once after a change (coalesced and spaced per environment), at an
instant (a reservation's start or end, a SIMULATED job's), and the sender that carries a
request to a worker.

The Celery tasks (quotas.tasks) are entry points above this layer: they register themselves
as the sender when the app loads (use_sender), so nothing here imports them. Without a
sender (a process that never loaded the tasks) a request is logged and left to the beat.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings

from quotaportal.infra import redis_client
from quotaportal.quotas.models import JobQueue

log = logging.getLogger(__name__)


class Sender:
    """How a tick request reaches a worker: `now(queue_id)` at once, `later(queue_id,
    countdown=s)` after a while, `at(queue_id, eta=when)` at an instant; `eager` when tasks
    run inline in this process (no broker)."""

    def __init__(self, now: Callable, later: Callable, at: Callable, eager: Callable[[], bool]):
        self.now, self.later, self.at, self.eager = now, later, at, eager


_sender: Sender | None = None


def use_sender(sender: Sender) -> None:
    global _sender
    _sender = sender


def sender() -> Sender:
    if _sender is None:
        raise RuntimeError("no tick sender: quotaportal.quotas.tasks was never loaded")
    return _sender


def enqueue_tick(queue_id: int) -> bool:
    """Ask a worker for a tick now, unless one for the queue's environment is queued already
    (it has not read the state yet, so it will see this change too). Soon after an immediate
    tick of the environment, the next one waits out the spacing that tick asked for
    (TickGate.spaced).

    The change has committed already, so a broker outage must not fail the request: the next
    beat (or the embedded loop) ticks the queue anyway. True when a tick was enqueued.
    """
    try:
        wait = gate.claim(queue_id)
        if wait is None:
            return False
        if wait > 0:
            sender().later(queue_id, countdown=wait)
        else:
            sender().now(queue_id)
    except Exception:  # the broker's errors vary by transport (redis, kombu, OSError)
        log.exception("could not enqueue a tick of queue %s; the next beat will tick it", queue_id)
        try:
            gate.release(queue_id)  # so the next change tries again
        except Exception:
            log.warning("could not release the tick mark of queue %s; it expires", queue_id)
        return False
    return True


def send_tick_at(queue_id: int, when: datetime) -> None:
    """A tick of the queue's environment at `when`, waiting for a tick in progress rather
    than skipping (the instant matters: a reservation starts, a simulated job ends)."""
    try:
        sender().at(queue_id, eta=when)
    except Exception:  # the broker's errors vary; the beat ticks soon after anyway
        log.exception("could not schedule a tick of queue %s at %s", queue_id, when)


WAKE_HORIZON_SECONDS = 600  # further off, the beat ticks first anyway (and eta tasks that
# wait past the broker's visibility timeout would be delivered twice)
_local_wakes: dict[int, datetime] = {}  # environment id -> earliest wake, without a broker
_local_wakes_lock = threading.Lock()


def schedule_wake(queue_id: int, when: datetime) -> None:
    """A tick of the queue's environment at `when`: the instant its backend's state changes by
    itself (a SIMULATED job's end), so the change is planned at once rather than at the next
    beat. One such tick waits per environment, the earliest asked for: every tick asks again
    for what is due after it, so later instants are never lost. Without a broker the embedded
    loop wakes for it (next_local_wake)."""
    env_id = environment_of(queue_id)
    if env_id is None:
        return
    if sender().eager():  # a task would run here and now, inline
        with _local_wakes_lock:
            if env_id not in _local_wakes or when < _local_wakes[env_id]:
                _local_wakes[env_id] = when
        return
    at, wall = when.timestamp(), time.time()
    if at <= wall:  # due now
        if _follow_ups_taken(queue_id):
            return
        enqueue_tick(queue_id)  # coalesced with the changes' ticks
        return
    if at - wall > WAKE_HORIZON_SECONDS:
        return
    try:
        store = redis_client.client(settings.REDIS_URL)
        waiting = store.get(_wake_key(env_id))
        # A wake still ahead and no later than this one will ask for this one when it runs.
        if waiting is not None and wall < float(waiting) <= at:
            return
        store.set(_wake_key(env_id), repr(at), ex=max(1, math.ceil(at - wall)) + 2)
    except Exception:  # Redis's errors vary; the beat ticks soon after anyway
        log.exception("could not schedule a tick of queue %s at %s", queue_id, when)
        return
    send_tick_at(queue_id, when)


class _FollowUps(threading.local):
    queue_ids: set[int] | None = None


_follow_ups = _FollowUps()


@contextmanager
def following_up() -> Iterator[set[int]]:
    """A worker's tick collects the ticks due at once that it asked for itself (a SIMULATED
    job it dispatched starts at the next tick), to run them right after it commits, in the
    same process: sent through the broker, such a tick waits for its delivery and for a
    free worker process."""
    _follow_ups.queue_ids = due = set()
    try:
        yield due
    except BaseException:
        # What committed before the failure still asked for them: the broker carries them.
        for queue_id in due:
            enqueue_tick(queue_id)
        raise
    finally:
        _follow_ups.queue_ids = None


def _follow_ups_taken(queue_id: int) -> bool:
    if _follow_ups.queue_ids is None:
        return False
    _follow_ups.queue_ids.add(queue_id)
    return True


def note_ticked(env_id: int) -> None:
    """A tick of the environment moved its time-driven state on and planned it: the beat's
    next tick of it is redundant for half a period (ticked_lately)."""
    if not settings.REDIS_URL:
        return  # the embedded loop's ticks are the periodic ones themselves
    try:
        redis_client.mark(_ticked_key(env_id), settings.QP_TICK_SECONDS / 2)
    except Exception:  # the beat's tick then runs, as before; nothing is lost
        log.warning("could not note the tick of environment %s", env_id, exc_info=True)


def ticked_lately(queue_id: int) -> bool:
    """Did a tick of the queue's environment run in the last half period? The beat's
    periodic tick is then skipped: a busy environment (submits, ends, reports) is ticked
    many times a period already, and the beat's ticks would only take worker time from
    the ticks the jobs' starts and ends ask for."""
    env_id = environment_of(queue_id)
    if env_id is None or not settings.REDIS_URL:
        return False
    try:
        return redis_client.marked(_ticked_key(env_id))
    except Exception:  # Redis's errors vary; then the beat ticks, as it always did
        return False


def next_local_wake() -> datetime | None:
    """The earliest wake asked for in this process (no broker), cleared as it is read: the
    embedded loop sleeps until then at most, and the ticks it runs ask again."""
    with _local_wakes_lock:
        soonest = min(_local_wakes.values(), default=None)
        _local_wakes.clear()
    return soonest


def _wake_key(env_id: int) -> str:
    return redis_client.key(f"tick-at:{env_id}")


class TickGate:
    """At most one immediate tick per service environment waits in the queue, and immediate
    ticks keep at most a ninth of a worker busy.

    claim() marks a tick of the environment as queued; the task releases the mark as it
    starts (started()), before it reads anything, so a change committed after that enqueues
    the next tick while one committed before it is seen by this one. A burst of submits thus
    costs a few ticks, and a lone submit still one at once. After an immediate tick that
    planned for d seconds, the next waits until SPACING_FACTOR * d after it ended (spaced()):
    a tick of a small environment (10 ms) delays the next change by 80 ms at most, while a
    burst against an environment with thousands of jobs waiting costs two or three ticks a
    second, not one tick after another on a whole core (REST submits at 8 clients: 160 a
    second with 4 times, 205-230 with 8 times; bench_submit). A change made while a tick
    runs waits as long, counted from the tick's start as its last tick's length plus that
    spacing: in a burst nearly every change comes while a tick runs, and before started()
    spaced them, ticks ran back to back (at 2,000 jobs waiting, 5.3-5.7 ticks a second with
    the beat's; 3.3-3.8 since).

    The marks live in Redis (shared by every web and worker process) when there is one, else
    in this process; they expire, so a worker that died holding one costs one beat period
    at most.
    """

    EXPIRES_SECONDS = 10
    SPACING_FACTOR = 8
    MAX_SPACING_SECONDS = 1.0  # the beat ticks every few seconds anyway
    PLANNED_KEPT_SECONDS = 600  # how long a tick's length is remembered for the next one

    def __init__(self):
        self._local: set[int] = set()
        self._local_spacing: dict[int, float] = {}  # environment -> monotonic end of spacing
        self._local_planned: dict[int, float] = {}  # environment -> its last tick's seconds
        self._lock = threading.Lock()

    def claim(self, queue_id: int) -> float | None:
        """Mark a tick of the queue's environment as queued: None when one is queued already
        (or the queue is gone), else the seconds the new tick should wait."""
        env_id = environment_of(queue_id)
        if env_id is None:
            return None
        if settings.REDIS_URL:
            store = redis_client.client(settings.REDIS_URL).pipeline(transaction=False)
            store.set(_key(env_id), 1, nx=True, ex=self.EXPIRES_SECONDS)
            store.pttl(_spacing_key(env_id))
            claimed, spacing_ms = store.execute()
            return max(spacing_ms, 0) / 1000 if claimed else None
        with self._lock:
            if env_id in self._local:
                return None
            self._local.add(env_id)
            return max(self._local_spacing.get(env_id, 0.0) - time.monotonic(), 0.0)

    def release(self, queue_id: int) -> None:
        env_id = environment_of(queue_id)
        if env_id is None:
            return
        if settings.REDIS_URL:
            redis_client.client(settings.REDIS_URL).delete(_key(env_id))
        else:
            with self._lock:
                self._local.discard(env_id)

    def started(self, queue_id: int) -> None:
        """An immediate tick of the queue's environment starts: release its mark, and space
        a change made while it runs as if the tick takes as long as the last one did."""
        self.release(queue_id)
        env_id = environment_of(queue_id)
        if env_id is None:
            return
        if settings.REDIS_URL:
            planned = redis_client.client(settings.REDIS_URL).get(_planned_key(env_id))
        else:
            planned = self._local_planned.get(env_id)
        self._space(env_id, float(planned or 0), running=True)

    def spaced(self, queue_id: int, planned_seconds: float) -> None:
        """An immediate tick of the queue's environment planned for this long: space the
        next one after it."""
        env_id = environment_of(queue_id)
        if env_id is None:
            return
        if settings.REDIS_URL:
            redis_client.client(settings.REDIS_URL).set(
                _planned_key(env_id), planned_seconds, ex=self.PLANNED_KEPT_SECONDS
            )
        else:
            with self._lock:
                self._local_planned[env_id] = planned_seconds
        self._space(env_id, planned_seconds)

    def _space(self, env_id: int, planned_seconds: float, *, running: bool = False) -> None:
        """The next immediate tick waits SPACING_FACTOR times the planning after the tick
        ends: from the start of a `running` tick, the tick's own length too."""
        factor = self.SPACING_FACTOR + 1 if running else self.SPACING_FACTOR
        spacing = min(factor * planned_seconds, self.MAX_SPACING_SECONDS)
        if spacing < 0.001:
            return
        if settings.REDIS_URL:
            redis_client.mark(_spacing_key(env_id), spacing)
        else:
            with self._lock:
                self._local_spacing[env_id] = time.monotonic() + spacing


gate = TickGate()
_environments: dict[int, int] = {}  # queue id -> its environment (a queue never moves)


def environment_of(queue_id: int) -> int | None:
    if queue_id not in _environments:
        env_id = (
            JobQueue.objects.filter(pk=queue_id)
            .values_list("service_environment_id", flat=True)
            .first()
        )
        if env_id is None:
            return None
        _environments[queue_id] = env_id
    return _environments[queue_id]


def _key(env_id: int) -> str:
    return redis_client.key(f"tick-queued:{env_id}")


def _spacing_key(env_id: int) -> str:
    return redis_client.key(f"tick-spacing:{env_id}")


def _ticked_key(env_id: int) -> str:
    return redis_client.key(f"ticked:{env_id}")


def _planned_key(env_id: int) -> str:
    return redis_client.key(f"tick-planned:{env_id}")
