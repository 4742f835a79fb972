"""One scheduler tick of a service environment's job queues: snapshot, plan, check, apply.

Queues that share a service environment share its capacity, so a tick covers all of them in
one transaction under the environment's advisory lock (a tick that finds it held records a
skipped run and stops). Queues are served in job-queue priority order, higher first: each sees
the capacity the others' dispatched jobs leave (bridge.capacity_of), so a lower queue gets what
the higher ones leave and no queue preempts another's jobs.

Per queue, in a savepoint (an invalid plan rolls back that queue alone):
1. Advance time-driven state: SIMULATED jobs start and end, attempts past their duration fail,
   RUNNABLE jobs past the queue's job-state time limit are terminated.
2. If nothing changed since the last plan (same state_version, capacity and dispatched-job
   count, no job without a pending reason, and the last plan is younger than
   QP_FULL_REPLAN_SECONDS), stop: the plan would be the same.
3. Read the snapshot (capacity: max_capacity plus the reservations active now; on a unit whose
   reservation has just ended, the usage the queue must fit in): of a long STRICT queue, the
   heads of its shares' lines (bridge.plan_heads), else every active job; plan it, check it.
4. Apply the plan with conditional updates, then record a SchedulerRun.
An invariant breach rolls everything back and is recorded as the run's error.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from quotaportal.infra.locks import lock_environment, try_lock_environment
from quotaportal.jobs.arrays import has_pending, release_pending
from quotaportal.jobs.time_limits import (
    enforce_attempt_timeouts,
    enforce_runnable_time_limits,
)
from quotaportal.quotas.backends import backend_for, self_scheduling_backends
from quotaportal.quotas.models import (
    DISPATCHED,
    TICK_SKIPPED,
    Job,
    JobQueue,
    JobStatus,
    Reservation,
    SchedulerRun,
    State,
    TickMemo,
)
from quotaportal.tick import bridge, changes, requests
from quotaportal.tick.bridge import fairness
from quotaportal.tick.carry import (
    Outcome,
    Planned,
    carry_out,
    record_sample,
    tick_at_next_change,
)
from quotaportal.tick.records import (
    collector_paused,
    count_tick,
    record_run,
    record_skip,
)
from scheduler import InvariantViolation, Plan, check_plan, plan_tick

log = logging.getLogger(__name__)


def run_tick(queue_id: int, now=None) -> SchedulerRun | None:
    """A periodic tick of the queue's service environment (all its queues), skipped when
    another tick of it is in progress: the run of this queue.

    None when the queue no longer exists (a tick enqueued before it was deleted): there is
    nothing to do, and that is no error.
    """
    return _tick_queue_environment(queue_id, now, try_lock_environment)


def run_tick_waiting(queue_id: int) -> SchedulerRun | None:
    """A tick asked for by a change or due at an instant: it waits for a tick in progress to
    finish instead of skipping, so the change is always planned at once."""
    return _tick_queue_environment(queue_id, None, lock_environment)


def _tick_queue_environment(queue_id: int, now, take_lock) -> SchedulerRun | None:
    env_id = requests.environment_of(queue_id)  # remembered: a queue never moves
    if env_id is None:
        log.info("tick of job queue %s skipped: the queue no longer exists", queue_id)
        return None
    return run_environment_tick(env_id, now, asked_by=queue_id, take_lock=take_lock).get(queue_id)


def run_environment_tick(
    env_id: int, now=None, asked_by: int | None = None, take_lock=try_lock_environment
) -> dict:
    """Tick every ENABLED queue of the environment, higher priority first: queue id -> run.
    `take_lock` takes the environment's tick lock (false when it is held elsewhere: the tick
    records a skipped run)."""
    runs = {}
    with transaction.atomic():
        locked = take_lock(env_id)
        # The time is read once the lock is held: a tick that waited plans as of now.
        own_clock, now = now is None, now or timezone.now()
        if not locked:
            if asked_by is not None:
                runs[asked_by] = record_skip(asked_by, now)
                count_tick(asked_by, TICK_SKIPPED, 0.0)
            return runs
        ended = ended_unfitted(env_id, now)
        fit_units = {unit for _, unit in ended}
        for queue in _queues_to_tick(env_id, asked_by):
            runs[queue.id] = _tick_queue(queue, now, _Turn(fit_units=fit_units))
        # Fitted once (unless a queue's plan failed: the next tick tries again); later drops
        # below usage, such as a lost host, drain instead of preempting.
        if not any(run.error for run in runs.values()):
            Reservation.objects.filter(id__in=[i for i, _ in ended]).update(fitted_at=now)
    if own_clock:  # a replay's tick on its virtual clock moves no real time on
        requests.note_ticked(env_id)
    return runs


def _queues_to_tick(env_id: int, asked_by: int | None = None):
    return (
        JobQueue.objects.select_related("service_environment", "tick_memo")
        .annotate(any_pending=has_pending())
        .filter(service_environment_id=env_id)
        .filter(_tickable() | Q(pk=asked_by))
        .order_by("-priority", "name")
    )


@dataclass(frozen=True)
class _Turn:
    """How a queue is ticked: a periodic or asked-for tick moves time-driven state on first
    (lost hosts, attempt and RUNNABLE time limits, simulated runs) and fits usage to the
    units whose reservation ended; a caller's own tick (tick_held) plans the caller's
    changes only, in the caller's transaction, and leaves the rest to the workers' ticks,
    which come every QP_TICK_SECONDS anyway."""

    advance: bool = True
    fit_units: frozenset[str] | set[str] = frozenset()


def ended_unfitted(env_id: int, now) -> list[tuple[int, str]]:
    """The environment's reservations that have ended and whose units usage was not yet
    fitted to: (id, unit name)."""
    return list(
        Reservation.objects.filter(
            environment_id=env_id, ends_at__lte=now, fitted_at__isnull=True
        ).values_list("id", "capacity_unit__name")
    )


INLINE_TICK_BUDGET_SECONDS = 0.25  # a caller's tick slower than this sends the next ...
INLINE_COOLDOWN_SECONDS = 60.0  # ... ones of its environment to the workers for this long
_slow_inline: dict[int, float] = {}  # environment id -> monotonic time it may tick inline again


def tick_held(held: changes.Held, now=None) -> bool:
    """Tick the environment now, in the caller's transaction (which holds its tick lock), for
    the changes `held` collected (changes.holding). A tick that fails rolls back alone, and one
    of an environment whose ticks are too slow to hold up a request is not tried: either way
    what was held goes to the commit (ticks enqueued, agents woken), so none is lost. True
    when it ticked."""
    if not held.queue_ids:
        return False
    if time.monotonic() < _slow_inline.get(held.env_id, 0.0):
        changes.release(held)
        return False
    started = time.perf_counter()
    try:
        with transaction.atomic():
            now = now or timezone.now()
            for queue in _queues_to_tick(held.env_id):
                _tick_queue(queue, now, _Turn(advance=False))
    except Exception:
        log.exception("inline tick of environment %s failed; enqueued instead", held.env_id)
        changes.release(held)
        return False
    finally:
        _took(held.env_id, time.perf_counter() - started)
    held.queue_ids.clear()
    return True


def _took(env_id: int, seconds: float) -> None:
    """Record how long a caller's tick took: a slow one sends the next ones to the workers."""
    if seconds > INLINE_TICK_BUDGET_SECONDS:
        log.info(
            "inline tick of environment %s took %.0f ms; ticking it on the workers for %.0f s",
            env_id,
            seconds * 1000,
            INLINE_COOLDOWN_SECONDS,
        )
        _slow_inline[env_id] = time.monotonic() + INLINE_COOLDOWN_SECONDS


def _tickable() -> Q:
    """ENABLED queues; and every queue whose environment's own scheduler runs it (AWS Batch):
    a DISABLED one must still have its state pushed and its jobs' ends pulled."""
    return Q(state=State.ENABLED) | Q(service_environment__backend__in=self_scheduling_backends())


def tickable_queue_ids() -> list[int]:
    """The queues the periodic tick (Celery beat, the embedded loop) visits."""
    return list(JobQueue.objects.filter(_tickable()).values_list("id", flat=True))


def _tick_queue(queue: JobQueue, now, turn: _Turn) -> SchedulerRun:
    started = time.perf_counter()
    # A caller's tick writes nothing before its plan is checked, and the caller's savepoint
    # (tick_held) rolls back any other failure: no savepoint of its own, two statements fewer
    # in every batch of reports that frees a GPU.
    try:
        with (
            transaction.atomic() if turn.advance else nullcontext(),
            collector_paused(),
            changes.planning(queue.id),
        ):
            outcome = _tick_locked(queue, now, turn)
    except InvariantViolation as err:
        log.error("tick of queue %s produced an invalid plan, nothing applied: %s", queue.id, err)
        return record_run(
            SchedulerRun(job_queue=queue, error=f"invalid plan, nothing applied: {err}"),
            now,
            started,
        )
    run = SchedulerRun(
        job_queue=queue,
        dispatched=outcome.dispatched,
        preempted=outcome.preempted,
        replanned=outcome.replanned,
        backend_calls=outcome.calls,
    )
    return record_run(run, now, started)


def _tick_locked(queue: JobQueue, now, turn: _Turn) -> Outcome:
    """Plan and apply (replanned False when nothing changed since the last plan); first, on a
    turn that advances, move time-driven state on."""
    advance, fit_units = turn.advance, turn.fit_units
    backend = backend_for(queue.service_environment)
    calls = (backend.advance(queue, now) or 0) if advance else 0
    if backend.schedules_itself:
        # AWS Batch dispatches, preempts and times out these jobs; the plan only explains.
        fit_units = frozenset()
    elif advance:
        enforce_attempt_timeouts(queue.id, now)
        enforce_runnable_time_limits(queue, now)
    # Jobs whose dependencies ended, and array children with a place, join the plan.
    released = release_pending(queue.id, now, any_pending=queue.any_pending)
    # The version is read after what this turn changed and before the plan reads anything (a
    # change committed since makes the plan newer than the version remembered with it, so the
    # next tick plans again, never the reverse). A caller's tick that changed nothing has the
    # one it read under the lock moments ago; its job counts are read only if that matches.
    changed = advance or released
    state = _queue_state(queue.id) if changed else _QueueState(queue.state_version)
    if not fit_units and _unchanged_since_last_plan(queue, state, now):
        TickMemo.objects.remember(queue.id, **record_sample(queue, None, now))
        tick_at_next_change(queue, backend, now)
        return Outcome(replanned=False, calls=calls)
    fair = fairness.opened(queue, now)  # the fair-share account, None without a policy
    loaded, plan = _plan(queue, now, fit_units, backend, fair)
    check_plan(loaded.snapshot, plan, positions=False)
    return carry_out(queue, Planned(loaded, plan, state.version, now), backend, fair, calls)


def _plan(queue: JobQueue, now, fit_units, backend, fair) -> tuple[bridge.Loaded, Plan]:
    """Read and plan the queue: from the heads of its shares' lines when that is enough,
    else every active job; under a fair-share policy, with each share's standing."""
    terms = terms_standing(queue, fair, now)
    if _reads_heads(queue, now, fit_units, terms, backend):
        return bridge.plan_heads(queue, now, terms, settings.QP_TICK_HEADS)
    loaded = bridge.load_snapshot(queue, now, fit_units, terms)
    return loaded, plan_tick(loaded.snapshot, now.timestamp(), positions=False)


def terms_standing(queue: JobQueue, fair, now) -> bridge.Terms:
    """The queue's terms for a plan; under a fair-share policy, with each share's standing."""
    terms = bridge.queue_terms(queue)
    if fair is not None:
        terms.standing = fair.standing(now.timestamp(), [r.share.name for r in terms.rows])
    return terms


def _reads_heads(queue: JobQueue, now, fit_units, terms: bridge.Terms, backend) -> bool:
    """A tick reads only the heads of the lines (and the jobs to explain) unless capacity
    must be fitted, the backend schedules itself, the queue cannot (bridge.reads_heads), its
    shares gained or lost a limit for a unit since the last plan (bridge.Terms: the reason of
    any job waiting on that unit changes), or every job was last read QP_FULL_PLAN_SECONDS ago
    (the full plan is the safety net for writes that bypassed the services; tick.full_plan
    makes it outside the lock, and a tick only when that has not come for twice as long), or
    too few jobs waited then for its shares (bridge.heads_pay_off: a short queue is cheaper to
    read whole than to read line by line and plan again when a line runs short)."""
    if fit_units or backend.schedules_itself or not bridge.reads_heads(queue):
        return False
    memo = TickMemo.of(queue)
    if memo.planned_terms != terms.digest or memo.fully_planned_at is None:
        return False
    if not bridge.heads_pay_off(memo.fully_planned_waiting or 0, len(terms.rows)):
        return False
    # The full plan is due after QP_FULL_PLAN_SECONDS and made outside the tick lock
    # (tick.full_plan); a tick makes it only when none has come for twice as long.
    age = (now - memo.fully_planned_at).total_seconds()
    return 0 <= age < 2 * settings.QP_FULL_PLAN_SECONDS


@dataclass(frozen=True)
class _QueueState:
    version: int  # JobQueue.state_version
    dispatched: int | None = None  # its jobs SCHEDULED, STARTING or RUNNING (None: not read)
    unexplained: bool = False  # a job waits in a share with no pending reason yet (a new one)


# What tells a tick whether the queue changed since its last plan, in one statement (both
# databases) without the ORM's query building: it runs on every tick, and both job reads are
# a small range of the (queue, status, reason) index, whatever the number of jobs waiting.
QUEUE_STATE_SQL = f"""
    SELECT q.state_version,
        (SELECT COUNT(*) FROM {Job._meta.db_table} j WHERE j.job_queue_id = q.id
            AND j.status IN ({", ".join(f"'{status}'" for status in DISPATCHED)})),
        EXISTS (SELECT 1 FROM {Job._meta.db_table} j WHERE j.job_queue_id = q.id
            AND j.status = '{JobStatus.RUNNABLE}' AND j.pending_reason = ''
            AND NOT j.preemption_stopping AND j.quota_share_id IS NOT NULL)
    FROM {JobQueue._meta.db_table} q WHERE q.id = %s
"""


def _queue_state(queue_id: int) -> _QueueState:
    with connection.cursor() as cursor:
        cursor.execute(QUEUE_STATE_SQL, [queue_id])
        version, dispatched, unexplained = cursor.fetchone()
    return _QueueState(version, dispatched, bool(unexplained))


def _unchanged_since_last_plan(queue: JobQueue, state: _QueueState, now) -> bool:
    memo = TickMemo.of(queue)
    if memo.planned_version != state.version or memo.planned_at is None:
        return False
    age = (now - memo.planned_at).total_seconds()
    if not 0 <= age < settings.QP_FULL_REPLAN_SECONDS:
        return False
    # Capacity follows hosts, which come and go without a service call.
    if bridge.capacity_of(queue, now) != memo.planned_capacity:
        return False
    # Submits leave the version alone (concurrent submits would take turns on the queue's
    # row): a job no tick has explained yet is a change. A count of the dispatched jobs
    # guards against writes that bypassed the services.
    if state.dispatched is None:
        state = _queue_state(queue.id)
    return (
        state.version == memo.planned_version
        and state.dispatched == memo.planned_dispatched_jobs
        and not state.unexplained
    )
