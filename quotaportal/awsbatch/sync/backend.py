"""The AWS_BATCH backend as the tick sees it, and the health of each environment's sync.

Each tick of an AWS_BATCH queue runs one sync: configuration (when due), new jobs, priority
changes, terminations, then statuses and positions, within QP_AWS_MAX_CALLS_PER_TICK calls
(the rest waits for the next tick). A throttled, failing or unreachable AWS stops the sync and
backs the environment off exponentially with jitter; the tick still explains the queue from
what was pulled last, and other environments tick on. Every failure and the recovery after
it are in the audit log.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from quotaportal.awsbatch.models import SyncState
from quotaportal.awsbatch.sync.client import BudgetSpent, Caller, Refused, Unavailable, client_for
from quotaportal.awsbatch.sync.jobs import (
    pull_jobs,
    pull_positions,
    push_new_jobs,
    push_priorities,
    push_terminations,
)
from quotaportal.awsbatch.sync.mirror import Sync, config_due, mirror_config
from quotaportal.quotas.backends import EnvironmentBackend
from quotaportal.quotas.models import EventKind
from quotaportal.quotas.services.connections import record_outcome

log = logging.getLogger(__name__)


class AwsBatchBackend(EnvironmentBackend):
    schedules_itself = True
    remote_name = "AWS Batch"

    def health(self, env) -> SyncState | None:
        return SyncState.objects.filter(environment=env).first()

    def advance(self, queue, now) -> int:
        return sync_queue(queue, now).caller.calls


def sync_queue(queue, now, *, dry_run: bool = False, client=None) -> Sync:
    """One sync of the queue with AWS Batch. With `dry_run` nothing is sent that would change
    AWS (the caller must roll the database back) and the health is left as it is."""
    env = queue.service_environment
    state, _ = SyncState.objects.get_or_create(environment=env)
    caller = Caller(
        None,
        settings.QP_AWS_MAX_CALLS_PER_TICK,
        dry_run=dry_run,
        seconds=None if dry_run else settings.QP_AWS_SYNC_SECONDS,
    )
    sync = Sync(caller, env, queue, now)
    if not dry_run and state.backing_off(now):
        sync.note(f"backing off until {state.backoff_until:%H:%M:%S} after: {state.last_error}")
        return sync
    error = None
    try:
        sync.caller.client = client or client_for(env)
        with transaction.atomic():
            error = _run(sync)
    except Exception as err:  # a bug or a bad profile: this sync's writes roll back, ticks go on
        log.exception("AWS sync of job queue %s failed", queue.name)
        error = f"{type(err).__name__}: {err}"
    if error:
        sync.note(f"error: {error}")
    if not dry_run:
        _record_health(state, sync, error)
    return sync


def _run(sync: Sync) -> str | None:
    """The sync's steps in order; the error that stopped it, if any. What was done before an
    error stays done (a job pushed is recorded as pushed)."""
    try:
        if sync.caller.dry_run or config_due(sync):  # a check always compares everything
            mirror_config(sync)
        push_new_jobs(sync)
        push_priorities(sync)
        push_terminations(sync)
        if sync.caller.pretended("create_job_queue"):
            sync.note("the job queue is not in AWS Batch yet: a sync creates it, nothing to pull")
            return None
        pull_jobs(sync)
        pull_positions(sync)
    except BudgetSpent:
        sync.note(
            f"call budget spent ({sync.caller.calls} of {sync.caller.budget} calls, or "
            f"{settings.QP_AWS_SYNC_SECONDS} s); the rest waits for the next tick"
        )
    except (Unavailable, Refused) as err:
        return str(err)
    return None


def _record_health(state: SyncState, sync: Sync, error: str | None) -> None:
    record_outcome(
        state,
        now=sync.now,
        calls=sync.caller.calls,
        error=error,
        queue=sync.queue,
        kinds=(EventKind.AWS_SYNC_FAILED, EventKind.AWS_SYNC_RECOVERED),
    )
