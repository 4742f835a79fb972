"""A job's whole output: stored as its backend streams it in (append_output), read back by
byte offset (read_output: the REST API, the job page, `qp logs -f`), forgotten after the
retention period (forget_old_output).

Each rank's output is a byte stream. A backend sends chunks at their offsets; a chunk sent
again after a lost answer is taken once (what was stored already is skipped), and one past
the stored end is refused with the offset expected (OutputGap), so nothing is stored twice or
with a hole. The last chunk is marked final once the rank ended and everything it printed
was sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.utils import timezone

from quotaportal.infra.bulk import insert_new
from quotaportal.quotas.errors import Conflict
from quotaportal.quotas.models import FINAL, Job, JobAttempt, OutputChunk

READ_LIMIT = 1024 * 1024  # bytes one read answers at most
# An ended attempt whose rank never sent its final chunk (its host was lost) is complete
# once nothing more arrived for this long.
SETTLE_SECONDS = 30
DELETE_BATCH = 5_000


class OutputGap(Conflict):
    """A chunk starts past what is stored: the sender must send from `expected`."""

    def __init__(self, expected: int):
        super().__init__({"offset": f"output is stored up to byte {expected}; send from there"})
        self.expected = expected


@dataclass(frozen=True)
class Stored:
    next_offset: int  # where the next chunk must start
    full: bool  # the rank's output reached QP_OUTPUT_MAX_BYTES: send no more


def append_output(
    attempt_id: int, rank: int, offset: int, data: bytes, final: bool = False, now=None
) -> Stored:
    limit = settings.QP_OUTPUT_MAX_BYTES
    with transaction.atomic():
        # One writer per attempt at a time: a resend racing its original is seen, not doubled.
        JobAttempt.objects.select_for_update().filter(pk=attempt_id).exists()
        end, ended = _stored_end(attempt_id, rank)
        if offset > end:
            raise OutputGap(end)
        data = data[end - offset :]
        if ended or (not data and not final):
            return Stored(end, full=end >= limit)
        data = data[: max(0, limit - end)]
        OutputChunk.objects.create(
            attempt_id=attempt_id,
            rank=rank,
            offset=end,
            length=len(data),
            data=data,
            final=final,
            received_at=now or timezone.now(),
        )
    return Stored(end + len(data), full=end + len(data) >= limit)


def mark_final_in_bulk(ranks: QuerySet, ends: dict[tuple[int, int], tuple[int, datetime]]) -> None:
    """The final mark of several ranks' outputs at once, each as
    `append_output(attempt, rank, offset, b"", final=True, now=when)` would store it:
    `ends` maps (attempt id, rank) to (where its output ends, when it ended). A rank whose
    stored output falls short of its end (a chunk still on its way) or is final already is
    left alone. Three statements however many ranks (an agent's batch of exits).

    `ranks` holds a row with `attempt_id` and `rank` for each (a host's placements): the
    read of each one's stored end goes through them, to its newest chunk only, however many
    chunks a long job stored."""
    if not ends:
        return
    # One writer per attempt at a time, as append_output; in id order, so two batches never
    # wait for each other crosswise.
    list(
        JobAttempt.objects.select_for_update()
        .filter(pk__in={attempt for attempt, _ in ends})
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    newest = OutputChunk.objects.filter(
        attempt_id=OuterRef("attempt_id"), rank=OuterRef("rank")
    ).order_by("-offset")
    stored = {
        (attempt, rank): (end or 0, bool(final))
        for attempt, rank, end, final in ranks.annotate(
            stored_end=Subquery(newest.values(end=F("offset") + F("length"))[:1]),
            stored_final=Subquery(newest.values("final")[:1]),
        ).values_list("attempt_id", "rank", "stored_end", "stored_final")
    }
    marks = []
    for (attempt, rank), (offset, when) in ends.items():
        stored_end, final = stored.get((attempt, rank), (0, False))
        if not final and offset <= stored_end:
            marks.append(
                OutputChunk(
                    attempt_id=attempt,
                    rank=rank,
                    offset=stored_end,
                    length=0,
                    data=b"",
                    final=True,
                    received_at=when,
                )
            )
    insert_new(marks)


def stored_length(attempt_id: int, rank: int) -> int:
    return _stored_end(attempt_id, rank)[0]


def _stored_end(attempt_id: int, rank: int) -> tuple[int, bool]:
    """(the stored output's length, whether its final chunk came)."""
    last = (
        OutputChunk.objects.filter(attempt_id=attempt_id, rank=rank)
        .order_by("-offset")
        .values_list("offset", "length", "final")
        .first()
    )
    return (0, False) if last is None else (last[0] + last[1], last[2])


@dataclass(frozen=True)
class OutputRead:
    attempt: int | None  # the attempt's number (None: the job has not started)
    rank: int
    offset: int
    next_offset: int
    data: bytes
    complete: bool  # nothing will follow next_offset
    size: int  # what is stored so far
    ranks: list[int]

    def headers(self) -> dict[str, str]:
        """What a reader needs to read on, as the REST API and the job page answer it."""
        return {
            "X-QP-Next-Offset": str(self.next_offset),
            "X-QP-Complete": "true" if self.complete else "false",
            "X-QP-Size": str(self.size),
            "X-QP-Attempt": "" if self.attempt is None else str(self.attempt),
            "X-QP-Ranks": ",".join(map(str, self.ranks)),
            "Cache-Control": "no-store",
        }


def read_output(
    job: Job,
    *,
    attempt: int | None = None,
    rank: int = 0,
    offset: int = 0,
    limit: int = READ_LIMIT,
    now=None,
) -> OutputRead:
    """Up to `limit` bytes of a rank's output from `offset` (the latest attempt unless one is
    named)."""
    now = now or timezone.now()
    attempts = job.attempts.order_by("-number")
    chosen = attempts.filter(number=attempt).first() if attempt else attempts.first()
    if chosen is None:
        done = job.status in FINAL
        return OutputRead(attempt, rank, offset, offset, b"", done, 0, [])
    chunks = OutputChunk.objects.filter(attempt=chosen, rank=rank)
    end, final = _stored_end(chosen.pk, rank)
    data = _bytes(chunks, offset, min(limit, READ_LIMIT))
    next_offset = offset + len(data)
    complete = next_offset >= end and (final or _settled(chosen, chunks, now))
    ranks = sorted(set(chosen.output_chunks.values_list("rank", flat=True))) or [0]
    return OutputRead(chosen.number, rank, offset, next_offset, data, complete, end, ranks)


def whole_output(job: Job, *, attempt: int | None = None, rank: int = 0):
    """Every stored byte of a rank's output, chunk by chunk (a download)."""
    offset = 0
    while True:
        read = read_output(job, attempt=attempt, rank=rank, offset=offset)
        if not read.data:
            return
        yield read.data
        offset = read.next_offset


def _bytes(chunks, offset: int, limit: int) -> bytes:
    """The stored bytes from `offset`, at most `limit`: only the chunks that hold them."""
    found = bytearray()
    rows = (
        chunks.annotate(end=F("offset") + F("length"))
        .filter(end__gt=offset)
        .order_by("offset")
        .values_list("offset", "data")
    )
    for start, data in rows.iterator(chunk_size=16):
        data = bytes(data)[max(0, offset + len(found) - start) :]
        found += data[: limit - len(found)]
        if len(found) >= limit:
            break
    return bytes(found)


def _settled(attempt: JobAttempt, chunks, now) -> bool:
    """An ended attempt whose rank will send nothing more (no final chunk: its host was lost,
    or the backend keeps no output)."""
    if attempt.stopped_at is None:
        return False
    latest = chunks.order_by("-received_at").values_list("received_at", flat=True).first()
    quiet_since = max(attempt.stopped_at, latest or attempt.stopped_at)
    return now - quiet_since >= timedelta(seconds=SETTLE_SECONDS)


def forget_old_output(now=None) -> int:
    """Delete the output that arrived more than QP_OUTPUT_RETENTION_DAYS ago; how many chunks."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.QP_OUTPUT_RETENTION_DAYS)
    deleted = 0
    while True:
        ids = list(
            OutputChunk.objects.filter(received_at__lt=cutoff).values_list("id", flat=True)[
                :DELETE_BATCH
            ]
        )
        if not ids:
            return deleted
        deleted += OutputChunk.objects.filter(pk__in=ids).delete()[0]
