"""Each rank's whole output, shipped by a real agent to a live server: all of it, in order,
once; the host's disk freed of what was sent; and the rest shipped by the next agent after a
kill -9."""

from __future__ import annotations

import os
import signal

import pytest

from quotaportal.hosts.models import Placement
from quotaportal.jobs.output import read_output
from quotaportal.quotas.models import Job, OutputChunk
from quotaportal.tick.loop import SchedulerLoop
from tests.hosts.builders import Fleet, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
LINES = 100_000


@pytest.fixture
def fleet(people, live_server, tmp_path, settings):
    settings.QP_HOST_TIMEOUT = 6
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    built = Fleet(people, live_server, tmp_path)
    built.start_agent("host-1")
    loop = SchedulerLoop(period=0.3)
    loop.start()
    yield built
    loop.stop()
    built.stop()


def whole(job: Job) -> bytes:
    found, offset = bytearray(), 0
    while True:
        read = read_output(Job.objects.get(pk=job.pk), offset=offset)
        found += read.data
        offset = read.next_offset
        if not read.data:
            return bytes(found)


def complete(job: Job) -> bool:
    job = Job.objects.get(pk=job.pk)
    return job.status == "SUCCEEDED" and read_output(job, offset=10**12).complete


def test_a_hundred_thousand_lines_arrive_whole_and_leave_the_hosts_disk(fleet):
    job = fleet.submit(name="chatty", command=f"seq 1 {LINES}")
    wait_until(lambda: complete(job), timeout=60, what="the whole output to arrive")
    expected = b"".join(b"%d\n" % i for i in range(1, LINES + 1))
    assert whole(job) == expected
    placement = Placement.objects.get(attempt__job=job)
    log = fleet.work_dir("host-1") / "jobs" / f"{job.pk}-1-{placement.rank}" / "output.log"
    kept = log.stat()
    assert kept.st_size == len(expected)  # offsets kept ...
    assert kept.st_blocks * 512 < len(expected) // 4  # ... and what was sent freed


def test_after_a_kill_9_the_next_agent_ships_the_rest(fleet):
    marker = fleet.work_dir("host-1") / "printed-half"
    command = f"seq 1 5000; touch {marker}; sleep 3; seq 5001 10000"
    job = fleet.submit(name="survivor", command=command, retry_attempts=1)
    wait_until(marker.exists, timeout=30, what="the first half to be printed")
    fleet.agents["host-1"].send_signal(signal.SIGKILL)
    fleet.agents["host-1"].wait()
    fleet.start_agent("host-1")  # its shim saw the lifeline go, and stopped the job
    wait_until(
        lambda: read_output(Job.objects.get(pk=job.pk), offset=10**12).complete,
        timeout=60,
        what="the output to be complete",
    )
    printed = whole(job)
    assert printed.startswith(b"".join(b"%d\n" % i for i in range(1, 5001)))
    assert printed.count(b"\n1\n") == 0  # nothing twice


def test_a_silent_job_is_complete_by_its_exit_report_alone(fleet):
    """Nothing printed: the exit report marks the output final at byte 0, and the shipper
    sends no chunk of its own (it would cost a request per trivial job)."""
    job = fleet.submit(name="silent", command="true")
    wait_until(lambda: complete(job), timeout=30, what="the job to end with its output final")
    chunks = list(
        OutputChunk.objects.filter(attempt__job=job).values_list(
            "offset", "length", "final", "received_at"
        )
    )
    exited = Placement.objects.get(attempt__job=job).exited_at
    assert chunks == [(0, 0, True, exited)]  # dated by the exit report, not a later chunk
