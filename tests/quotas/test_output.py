"""A job's whole output: stored once, in order, whatever is sent twice or out of turn; read
back by offset; complete when the rank ended; forgotten after the retention period."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from quotaportal.jobs.output import (
    SETTLE_SECONDS,
    OutputGap,
    append_output,
    forget_old_output,
    read_output,
)
from quotaportal.quotas.models import JobAttempt, OutputChunk
from tests.builders import submit


@pytest.fixture
def attempt(people, fleet):
    job = submit(people.alice, fleet, name="printer")
    return JobAttempt.objects.create(job=job, number=1)


def test_chunks_sent_twice_or_overlapping_are_stored_once(attempt):
    assert append_output(attempt.pk, 0, 0, b"hello ").next_offset == 6
    assert append_output(attempt.pk, 0, 0, b"hello ").next_offset == 6  # a resend
    assert append_output(attempt.pk, 0, 3, b"lo world\n").next_offset == 12  # overlaps
    read = read_output(attempt.job)
    assert read.data == b"hello world\n"
    assert (read.next_offset, read.complete) == (12, False)


def test_a_chunk_past_the_stored_end_is_refused_with_the_offset_to_send_from(attempt):
    append_output(attempt.pk, 0, 0, b"abc")
    with pytest.raises(OutputGap) as gap:
        append_output(attempt.pk, 0, 10, b"xyz")
    assert gap.value.expected == 3
    assert OutputChunk.objects.count() == 1


def test_reads_go_by_offset_and_limit_across_chunks(attempt):
    for i in range(5):
        append_output(attempt.pk, 0, i * 4, f"{i}{i}{i}\n".encode())
    part = read_output(attempt.job, offset=6, limit=7)
    assert part.data == b"1\n222\n3"
    assert part.next_offset == 13
    assert read_output(attempt.job, offset=20).data == b""


def test_ranks_are_kept_apart(attempt):
    append_output(attempt.pk, 0, 0, b"rank zero\n")
    append_output(attempt.pk, 1, 0, b"rank one\n")
    assert read_output(attempt.job, rank=1).data == b"rank one\n"
    assert read_output(attempt.job).ranks == [0, 1]


def test_complete_once_the_final_chunk_came_and_nothing_after_it(attempt):
    append_output(attempt.pk, 0, 0, b"done\n", final=True)
    assert append_output(attempt.pk, 0, 5, b"more").next_offset == 5  # nothing after final
    assert read_output(attempt.job).complete
    assert not read_output(attempt.job, limit=2).complete  # more to read first


def test_an_ended_attempt_without_a_final_chunk_settles(attempt):
    """Its host was lost: it will send nothing more; readers must not wait for ever."""
    append_output(attempt.pk, 0, 0, b"partial")
    now = timezone.now()
    JobAttempt.objects.filter(pk=attempt.pk).update(stopped_at=now)
    assert not read_output(attempt.job, now=now).complete
    later = now + timedelta(seconds=SETTLE_SECONDS + 1)
    assert read_output(attempt.job, now=later).complete


def test_output_beyond_the_limit_is_not_kept(attempt, settings):
    settings.QP_OUTPUT_MAX_BYTES = 10
    stored = append_output(attempt.pk, 0, 0, b"0123456789abcdef")
    assert (stored.next_offset, stored.full) == (10, True)
    assert read_output(attempt.job).data == b"0123456789"


def test_a_job_not_started_has_no_output_yet(people, fleet):
    job = submit(people.alice, fleet, name="waiting")
    read = read_output(job)
    assert (read.data, read.attempt, read.complete) == (b"", None, False)


def test_old_output_is_forgotten(attempt, settings):
    settings.QP_OUTPUT_RETENTION_DAYS = 7
    now = timezone.now()
    append_output(attempt.pk, 0, 0, b"old", now=now - timedelta(days=8))
    append_output(attempt.pk, 0, 3, b"new", now=now)
    assert forget_old_output(now) == 1
    assert list(OutputChunk.objects.values_list("data", flat=True)) == [b"new"]
