"""Recording how a backend's calls to its remote scheduler went (AWS Batch, Slurm): failures
back the environment off exponentially with jitter, and every failure and the recovery after
it are in the audit log."""

from __future__ import annotations

import random
from datetime import timedelta

from quotaportal.quotas.audit import record
from quotaportal.quotas.models.connections import ConnectionHealth

BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS = 1.0, 60.0


def backoff_seconds(failures: int) -> float:
    """Exponential backoff with jitter: half the step is fixed, half random, so environments
    that failed together do not all come back at the same instant."""
    step = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(failures - 1, 0))
    return step / 2 + random.uniform(0, step / 2)


def record_outcome(
    state: ConnectionHealth,
    *,
    now,
    calls: int,
    error: str | None,
    queue,
    kinds: tuple[str, str],
) -> None:
    """Save how the calls of one tick went. `kinds`: the event kinds of a failure and of the
    recovery after failures."""
    failed_kind, recovered_kind = kinds
    environment = queue.service_environment.name
    state.last_attempt_at, state.last_calls = now, calls
    if error:
        state.failures += 1
        wait = backoff_seconds(state.failures)
        state.backoff_until = now + timedelta(seconds=wait)
        state.last_error, state.last_error_at = error[:2000], now
        record(
            None,
            failed_kind,
            queue=queue,
            environment=environment,
            error=error[:2000],
            failures_in_a_row=state.failures,
            retry_in_seconds=round(wait, 1),
        )
    else:
        if state.failures:
            record(
                None,
                recovered_kind,
                queue=queue,
                environment=environment,
                after_failures=state.failures,
                last_error=state.last_error,
            )
        state.failures, state.backoff_until, state.last_success_at = 0, None, now
    state.save()
