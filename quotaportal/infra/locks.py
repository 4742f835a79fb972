"""PostgreSQL advisory locks, named in one place so no two features share an id."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

ADVISORY_LOCKS = {
    # (namespace, service_environment.id): one tick of an environment's queues at a time, so
    # queues sharing its capacity never plan against the same free instances.
    "environment_tick": 80_402,
    # (namespace, 0): one publisher of the audit log's outbox at a time, so deliveries are
    # made in the order of the events.
    "event_publish": 80_403,
    # (namespace, 0): one writer of the hourly usage rows at a time (beat and a backfill).
    "usage_rollup": 80_404,
    # (namespace, webhook.id): one sender of a webhook's deliveries at a time, in order.
    "webhook_send": 80_405,
    # (namespace, 0): one refresh of the start-time estimates at a time across workers.
    "estimate_refresh": 80_406,
    # (namespace, job_queue.id): one full plan of a queue outside its tick lock at a time.
    "full_plan": 80_407,
}


def try_lock(name: str, key: int = 0) -> bool:
    """Take the named advisory lock for this transaction; False when another holds it (always
    True on SQLite, which serializes writers itself)."""
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [ADVISORY_LOCKS[name], key])
        return bool(cursor.fetchone()[0])


@contextmanager
def session_lock(name: str, key: int = 0) -> Iterator[bool]:
    """Try the named advisory lock for this connection's session, outside any transaction,
    and hold it for the block: True when taken. A process killed while it holds the lock
    lets go of it at once (its connection closes), unlike a lease that must run out first.
    Always True on SQLite (the embedded default has one sender)."""
    if connection.vendor != "postgresql":
        yield True
        return
    namespace = ADVISORY_LOCKS[name]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [namespace, key])
        taken = bool(cursor.fetchone()[0])
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [namespace, key])


def try_lock_environment(environment_id: int) -> bool:
    """Take the environment's tick lock for this transaction; False when another tick holds it.

    SQLite has no advisory locks; it serializes writers itself, and the embedded mode runs a
    single scheduler loop, so the lock is a no-op there.
    """
    return try_lock("environment_tick", environment_id)


def lock_environment(environment_id: int, timeout_seconds: float = 5.0) -> bool:
    """Wait (up to the timeout) for the environment's tick lock; False if it never came.

    An immediate tick waits rather than skips: the tick holding the lock may have read the
    state before the change that asked for this one, so skipping could leave that change
    unseen until the next beat.
    """
    if try_lock_environment(environment_id):
        return True  # the usual case, free: one statement, no savepoint
    from django.db import OperationalError, transaction

    namespace, env, waits = (
        int(ADVISORY_LOCKS["environment_tick"]),
        int(environment_id),
        int(timeout_seconds * 1000),
    )
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            # A savepoint: a lock timeout fails only this, never the caller's transaction.
            # One round trip for the three statements (integers only, so no parameters):
            # every agent's batch of reports and every tick takes this lock.
            cursor.execute(
                f"SET LOCAL lock_timeout = '{waits}ms'; "
                f"SELECT pg_advisory_xact_lock({namespace}, {env}); "
                "SET LOCAL lock_timeout = 0"
            )
    except OperationalError:
        return False
    return True
