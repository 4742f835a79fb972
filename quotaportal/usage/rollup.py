"""Hourly usage rows kept up to date: each complete hour is summed once from the attempts
(and re-summed for a while, since an agent's late report or the AWS sync may still move an
attempt's times), so a report reads a few rows per hour instead of every attempt."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, Min, Sum
from django.db.models.functions import TruncDay, TruncWeek
from django.utils import timezone

from quotaportal.infra.locks import try_lock
from quotaportal.quotas.models import JobAttempt, JobQueue
from quotaportal.usage import inputs
from quotaportal.usage.models import (
    DAY,
    FIGURES,
    HOUR,
    WEEK,
    RollupState,
    UsageHour,
    UsageWait,
)
from scheduler.accounting import PREEMPTION_KINDS, Figures, Ledger, account

KEYS = ("job_queue", "quota_share", "team", "user", "unit")
# Hours this recent are summed again at each roll-up: late reports land within it.
RECHECK = timedelta(hours=2)
CHUNK = timedelta(days=1)  # hours summed per statement batch in a backfill
WAIT_BUCKET_RATIO = 1.15  # each wait bucket is this much wider than the one before


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def floor_day(moment: datetime) -> datetime:
    return floor_hour(moment).replace(hour=0)


def floor_week(moment: datetime) -> datetime:
    """The Monday 00:00 UTC that starts the ISO week."""
    day = floor_day(moment)
    return day - timedelta(days=day.weekday())


def figure_sums() -> dict:
    """SUM of every figure, aliased (an annotation may not take its field's name)."""
    return {f"sum_{name}": Sum(name) for name in FIGURES}


def unaliased(values: dict) -> dict:
    """figure_sums()'s results under the figures' own names."""
    return {name: values[f"sum_{name}"] for name in FIGURES}


FLOORS = {DAY: floor_day, WEEK: floor_week}
TRUNCATE = {DAY: TruncDay, WEEK: TruncWeek}
SPAN_BELOW = {DAY: HOUR, WEEK: DAY}


def write_longer_spans(start: datetime, end: datetime) -> None:
    """Day rows for the whole UTC days in [start, end), summed from their hour rows, then
    week rows from the day rows: a quarter's report reads a dozen weeks and a few days per
    group instead of two thousand hours."""
    for span in (DAY, WEEK):
        floor = FLOORS[span]
        write_span(span, floor(start), floor(end))


def write_span(span: int, start: datetime, end: datetime) -> None:
    """Replace the `span` rows in [start, end) with the sums of the rows one span below."""
    if start >= end:
        return
    below = {"span": SPAN_BELOW[span], "hour__gte": start, "hour__lt": end}
    UsageHour.objects.filter(span=span, hour__gte=start, hour__lt=end).delete()
    UsageWait.objects.filter(span=span, hour__gte=start, hour__lt=end).delete()
    truncate = TRUNCATE[span]
    rows = (
        UsageHour.objects.filter(**below)
        .annotate(at=truncate("hour", tzinfo=UTC))
        .values("at", *KEYS)
        .annotate(**figure_sums())
        .order_by()
    )
    UsageHour.objects.bulk_create(
        (
            UsageHour(hour=row["at"], span=span, **{k: row[k] for k in KEYS}, **unaliased(row))
            for row in rows
        ),
        batch_size=2000,
    )
    waits = (
        UsageWait.objects.filter(**below)
        .annotate(at=truncate("hour", tzinfo=UTC))
        .values("at", "bucket", *KEYS)
        .annotate(n=Sum("jobs"))
        .order_by()
    )
    UsageWait.objects.bulk_create(
        (
            UsageWait(
                hour=r["at"], span=span, bucket=r["bucket"], jobs=r["n"], **{k: r[k] for k in KEYS}
            )
            for r in waits
        ),
        batch_size=2000,
    )


def rolled_until() -> datetime | None:
    state = RollupState.objects.first()
    return state.rolled_until if state else None


def attempt_reach() -> timedelta:
    """How far before a period an attempt that reaches into it may have started: the longest
    attempt seen (kept by the roll-ups), plus two roll-up periods for one that ended since."""
    state = RollupState.objects.first()
    if state is None:
        return timedelta(seconds=_longest_on_record())
    margin = 2 * settings.QP_USAGE_ROLLUP_SECONDS
    return timedelta(seconds=state.longest_attempt_seconds + margin)


def _longest_on_record() -> float:
    """Every closed attempt's duration read once (the first roll-up, a backfill)."""
    longest = JobAttempt.objects.filter(stopped_at__isnull=False).aggregate(
        longest=Max(F("stopped_at") - F("started_at"))
    )["longest"]
    return longest.total_seconds() if longest else 0.0


def _longest_now(now: datetime, previous: float | None) -> float:
    """The longest attempt so far: the open ones count with their age, so one that runs for
    days raises it while it runs, before it ends."""
    oldest_open = JobAttempt.objects.filter(stopped_at__isnull=True).aggregate(Min("started_at"))[
        "started_at__min"
    ]
    open_for = (now - oldest_open).total_seconds() if oldest_open else 0.0
    known = _longest_on_record() if previous is None else previous
    return max(known, open_for)


def roll_up(
    now: datetime | None = None,
    *,
    since: datetime | None = None,
    progress: Callable[[datetime, datetime], None] | None = None,
) -> int:
    """Write the rows of every complete hour from `since` (by default the last roll-up less
    RECHECK; the first attempt's hour the first time) up to the current hour. Idempotent:
    an hour's rows are replaced whole. Returns how many rows were written; 0 when another
    roll-up holds the lock."""
    now = now or timezone.now()
    until = floor_hour(now)
    _record_longest(now, full=since is not None)
    start = since or _resume_from()
    if start is None:
        _record(until)
        return 0
    start = floor_hour(start)
    start_of_spans = start
    written = 0
    while start < until:
        end = min(start + CHUNK, until)
        with transaction.atomic():
            if not try_lock("usage_rollup"):
                return written
            reach = attempt_reach()
            for queue in JobQueue.objects.select_related("service_environment"):
                written += write_hours(queue, start, end, reach)
        if progress:
            progress(end, until)
        start = end
    with transaction.atomic():
        if try_lock("usage_rollup"):
            write_longer_spans(start_of_spans, until)
    _record(until)
    return written


def _resume_from() -> datetime | None:
    last = rolled_until()
    if last is not None:
        return last - RECHECK
    return JobAttempt.objects.aggregate(Min("started_at"))["started_at__min"]


def _record_longest(now: datetime, full: bool) -> None:
    state, created = RollupState.objects.get_or_create(pk=1)
    previous = None if created or full else state.longest_attempt_seconds
    state.longest_attempt_seconds = _longest_now(now, previous)
    state.save(update_fields=["longest_attempt_seconds"])


def _record(until: datetime) -> None:
    state, _ = RollupState.objects.get_or_create(pk=1)
    if state.rolled_until is None or state.rolled_until < until:
        state.rolled_until = until
        state.save(update_fields=["rolled_until"])


def write_hours(queue: JobQueue, start: datetime, end: datetime, reach=None) -> int:
    """Replace the queue's rows for the hours in [start, end)."""
    ledger = ledger_of(queue, start, end, reach)
    mine = {"span": HOUR, "job_queue": queue.name, "hour__gte": start, "hour__lt": end}
    UsageHour.objects.filter(**mine).delete()
    UsageWait.objects.filter(**mine).delete()
    hours = [_hour_row(hour, key, figures) for (hour, key), figures in ledger.items()]
    UsageHour.objects.bulk_create(hours, batch_size=2000)
    UsageWait.objects.bulk_create(_wait_rows(ledger), batch_size=2000)
    return len(hours)


def ledger_of(queue: JobQueue, start: datetime, end: datetime, reach=None) -> Ledger:
    loaded = inputs.load(queue, start, end, reach or attempt_reach())
    return account(
        loaded.attempts,
        loaded.terms,
        loaded.waiting,
        loaded.capacity,
        start.timestamp(),
        end.timestamp(),
    )


def row_values(figures: Figures) -> dict:
    """A ledger entry's figures under the rows' (and the reports') names."""
    values = {
        name: getattr(figures, name)
        for name in FIGURES
        if not name.startswith("preempted_") and hasattr(figures, name)
    }
    for kind in PREEMPTION_KINDS:
        values[f"preempted_{kind}_instance_seconds"] = figures.preempted.get(kind, 0.0)
    return values


def _keyed(hour: float, key: tuple) -> dict:
    """A ledger entry's hour and key as the rows' columns."""
    return {"hour": datetime.fromtimestamp(hour, UTC), **dict(zip(KEYS, key, strict=True))}


def _hour_row(hour: float, key: tuple, figures: Figures) -> UsageHour:
    return UsageHour(**_keyed(hour, key), **row_values(figures))


def wait_bucket(seconds: float) -> int:
    """The logarithmic bucket of a wait: 0 for under a second, then ×WAIT_BUCKET_RATIO."""
    if seconds < 1:
        return 0
    return 1 + int(math.log(seconds) / math.log(WAIT_BUCKET_RATIO))


def _wait_rows(ledger: Ledger) -> list[UsageWait]:
    rows = []
    for (hour, key), figures in ledger.items():
        counts: dict[int, int] = {}
        for wait in figures.waits:
            bucket = wait_bucket(wait)
            counts[bucket] = counts.get(bucket, 0) + 1
        rows += [
            UsageWait(**_keyed(hour, key), bucket=bucket, jobs=count)
            for bucket, count in counts.items()
        ]
    return rows
