"""PostgreSQL advisory locks, named in one place so no two features share an id."""

from __future__ import annotations

from django.db import connection

ADVISORY_LOCKS = {
    "queue_tick": 80_401,  # (namespace, job_queue.id): one tick of a queue at a time
}


def try_lock_queue(queue_id: int) -> bool:
    """Take the queue's tick lock for the current transaction; False when another tick holds it.

    SQLite has no advisory locks; it serializes writers itself, and the embedded mode runs a
    single scheduler loop, so the lock is a no-op there.
    """
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_try_advisory_xact_lock(%s, %s)", [ADVISORY_LOCKS["queue_tick"], queue_id]
        )
        return bool(cursor.fetchone()[0])
