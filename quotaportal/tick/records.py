"""What a tick leaves behind: its SchedulerRun and the queue's tick-duration counters (for
/metrics), or a record that it found its environment's lock
taken; and the cycle collector paused while it runs."""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager

from django.db import IntegrityError, connection, transaction

from quotaportal.quotas.models import (
    TICK_BUCKETS,
    SchedulerRun,
    TickStat,
)


@contextmanager
def collector_paused():
    """Python's cycle collector stays off while a tick reads, plans and writes. A tick makes a
    hundred thousand objects (the snapshot's jobs, the plan's entries) that live until it ends
    and hold no cycles, and every collection their allocation sets off walks all of them: a
    sixth of a 100k tick (bench_tick). The collector is the process's, shared by its threads:
    only a caller that found it on turns it on again."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def record_run(run: SchedulerRun, now, started: float) -> SchedulerRun:
    seconds = time.perf_counter() - started
    run.started_at, run.duration_ms = now, seconds * 1000
    run.save(force_insert=True)
    count_tick(run.job_queue_id, bucket_of(seconds), seconds)
    return run


def bucket_of(seconds: float) -> str:
    """The tick-duration histogram bucket a tick falls in (Prometheus: `le`)."""
    return next((b for b in TICK_BUCKETS if seconds <= float(b)), "+Inf")


# One statement whether or not the bucket's row exists yet (PostgreSQL, and SQLite 3.24+).
_STATS = TickStat._meta.db_table
COUNT_TICK_SQL = f"""
    INSERT INTO {_STATS} (job_queue_id, bucket, count, seconds)
    VALUES (%(queue)s, %(bucket)s, 1, %(seconds)s)
    ON CONFLICT (job_queue_id, bucket) DO UPDATE
    SET count = {_STATS}.count + 1, seconds = {_STATS}.seconds + excluded.seconds
"""


def count_tick(queue_id: int, bucket: str, seconds: float) -> None:
    """Add one tick to the queue's cumulative counters (for /metrics)."""
    with connection.cursor() as cursor:
        cursor.execute(COUNT_TICK_SQL, {"queue": queue_id, "bucket": bucket, "seconds": seconds})


def record_skip(queue_id: int, now) -> SchedulerRun | None:
    """A record that the queue's tick found its environment's lock taken; None when the
    queue was deleted meanwhile (its delete holds that lock)."""
    try:
        with transaction.atomic():
            run = SchedulerRun.objects.create(job_queue_id=queue_id, started_at=now, skipped=True)
            # The queue's key checked now, inside this savepoint, not at the caller's commit.
            connection.check_constraints(table_names=[SchedulerRun._meta.db_table])
            return run
    except IntegrityError:
        return None
