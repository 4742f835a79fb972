"""Shims forked by the spawner behave as shims started alone: the job's exit code, output,
environment and directory; a shim killed outright reads as -9; a dead spawner means the next
jobs start the old way, not that they fail."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from quotaportal.hosts.agent.runner import RunningJob
from quotaportal.hosts.agent.spawner import ForkedShim, Spawner
from tests.hosts.builders import rank


@pytest.fixture
def lifeline():
    read, write = os.pipe()
    yield read
    os.close(write)
    os.close(read)


@pytest.fixture
def spawner(lifeline):
    spawner = Spawner(lifeline)
    yield spawner
    spawner.close()


def start(tmp_path, lifeline, spawner, placement, command) -> RunningJob:
    return RunningJob(
        rank(placement, command), tmp_path, lifeline=lifeline, orphan_grace=1, spawner=spawner
    )


def finished(job: RunningJob, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while (code := job.poll()) is None:
        assert time.monotonic() < deadline, "the job did not finish"
        time.sleep(0.01)
    return code


def test_a_forked_shim_runs_the_job_as_a_shim_of_its_own_would(tmp_path, lifeline, spawner):
    os.environ["QP_SECRET_OF_THE_AGENT"] = "do-not-leak"
    try:
        job = start(
            tmp_path,
            lifeline,
            spawner,
            7,
            'echo "id=$QP_JOB_ID secret=$QP_SECRET_OF_THE_AGENT dir=$(pwd)"; exit 3',
        )
    finally:
        del os.environ["QP_SECRET_OF_THE_AGENT"]
    assert isinstance(job.process, ForkedShim), "started through the spawner"
    assert finished(job) == 3
    job_dir = tmp_path / "jobs" / "job-7-1-0"
    assert job.output_tail().strip() == f"id=job-7 secret= dir={job_dir}"
    assert os.getpgid(os.getpid()) != job.process.pid, "the shim leads a group of its own"


def test_a_shim_killed_outright_reads_as_killed(tmp_path, lifeline, spawner):
    job = start(tmp_path, lifeline, spawner, 8, "sleep 30")
    os.killpg(job.process.pid, signal.SIGKILL)
    assert finished(job) == -signal.SIGKILL


def test_a_job_s_group_can_be_signalled_as_soon_as_its_start_returns(tmp_path, lifeline, spawner):
    """The shim leads its own group by the time the spawner answers: a stop sent at once (a
    job terminated or preempted right after it started) finds the group, not nothing."""
    jobs = [start(tmp_path, lifeline, spawner, 100 + n, "sleep 30") for n in range(20)]
    for job in jobs:
        os.killpg(job.process.pid, signal.SIGKILL)
    assert [finished(job) for job in jobs] == [-signal.SIGKILL] * len(jobs)


def test_jobs_start_the_old_way_once_the_spawner_is_gone(tmp_path, lifeline, spawner):
    first = start(tmp_path, lifeline, spawner, 9, "true")
    assert finished(first) == 0
    spawner._process.kill()
    spawner._process.wait()
    second = start(tmp_path, lifeline, spawner, 10, "exit 4")
    assert not isinstance(second.process, ForkedShim)
    assert finished(second) == 4
    assert spawner.broken


def test_a_job_cannot_leave_its_own_exit_code(tmp_path, lifeline, spawner):
    """The shim writes the code where the job cannot (not in the job's directory)."""
    job = start(tmp_path, lifeline, spawner, 11, 'echo 0 > "$HOME/exit-code"; exit 5')
    assert finished(job) == 5


def test_a_job_is_done_only_once_what_it_left_running_is_gone(tmp_path, lifeline, spawner):
    """The forked shim is its job's subreaper: a leftover keeps the GPUs busy until it ends."""
    began = time.monotonic()
    job = start(tmp_path, lifeline, spawner, 12, "sleep 0.6 & exit 0")
    assert finished(job) == 0
    assert time.monotonic() - began >= 0.5, "the leftover sleep still held the GPUs"


def test_a_spawner_holds_no_descriptor_before_its_first_job(lifeline):
    before = set(os.listdir("/proc/self/fd"))
    spawner = Spawner(lifeline)
    assert set(os.listdir("/proc/self/fd")) == before
    spawner.close()


def test_the_shared_folders_are_made_passable_not_listable_and_again_when_removed(
    tmp_path, lifeline, spawner
):
    """Jobs of another user may pass through `jobs` and `checkpoints` but not list them; a
    start after they were removed (an operator cleaning up) makes them again, so."""
    work = tmp_path / "work"
    shared = (work, work / "jobs", work / "checkpoints")
    assert finished(start(work, lifeline, spawner, 1, "true")) == 0
    assert {folder.stat().st_mode & 0o777 for folder in shared} == {0o711}
    for folder in (work / "jobs", work / "checkpoints"):
        shutil.rmtree(folder)
    assert finished(start(work, lifeline, spawner, 2, "pwd")) == 0
    assert {folder.stat().st_mode & 0o777 for folder in shared} == {0o711}
