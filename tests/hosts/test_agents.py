"""Two real quotaportal-agent processes (simulated GPUs) against a live server on PostgreSQL."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import GpuHost, Placement
from quotaportal.quotas import services
from quotaportal.quotas.loop import SchedulerLoop
from quotaportal.quotas.models import Job
from tests.conftest import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)
PYTHON = shlex.quote(sys.executable)


def wait_until(check, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


TWO_SHARES = (("a", "vision", 2, "LEND_AND_BORROW"), ("b", "nlp", 2, "LEND"))


class Fleet:
    def __init__(self, people, live_server, tmp_path, *, grace: int = 5, shares=TWO_SHARES):
        self.env, self.queue = build_queue(
            people.admin,
            unit="gpu1",
            capacity=8,
            backend="LOCAL",
            env_name="local",
            preemption_grace_seconds=grace,
        )
        for name, team, limit, strategy in shares:
            add_share(people.admin, self.queue, name, team, limit, strategy, unit="gpu1")
        self.tokens: dict[str, str] = {}
        self.url, self.tmp = live_server.url, tmp_path
        self.agents: dict[str, subprocess.Popen] = {}
        self.admin = people.admin

    def token_for(self, name: str) -> str:
        """One agent identity per host, as an admin hands them out."""
        if name not in self.tokens:
            self.tokens[name] = host_services.create_agent_token(self.admin, self.env, name)
        return self.tokens[name]

    def start_agent(self, name: str, gpus: int = 2, *extra: str) -> None:
        log = open(self.tmp / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        self.agents[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quotaportal.hosts.agent",
                "--server",
                self.url,
                "--name",
                name,
                "--simulate",
                str(gpus),
                "--capacity-unit",
                "gpu1",
                "--interval",
                "0.3",
                "--output-every",
                "1",
                "--work-dir",
                str(self.work_dir(name)),
                "--allow-root-jobs",  # the suite may run as root; --run-as in extra wins
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "QP_AGENT_TOKEN": self.token_for(name)},
        )
        wait_until(
            lambda: GpuHost.objects.filter(name=name, state="READY").exists(),
            what=f"{name} to register",
        )

    def work_dir(self, name: str) -> Path:
        return self.tmp / name

    def checkpoint(self, host: str, job: Job) -> Path:
        return self.work_dir(host) / "checkpoints" / str(job.pk)

    def submit(self, share="a", name="job", command="true", **fields):
        return services.submit_job(
            self.admin,
            job_queue=self.queue,
            quota_share=share,
            capacity_unit="gpu1",
            name=name,
            command=command,
            **fields,
        )

    def output(self, job) -> str:
        """What the job's first attempt printed so far, read on its host."""
        placement = Placement.objects.filter(attempt__job=job, attempt__number=1).first()
        if placement is None:
            return ""
        log = self.work_dir(placement.host.name) / "jobs" / f"{job.pk}-1-{placement.rank}"
        try:
            return (log / "output.log").read_text()
        except OSError:
            return ""

    def status(self, job) -> str:
        return Job.objects.get(pk=job.pk).status

    def stop(self):
        for process in self.agents.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.agents.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture
def fleet(people, live_server, tmp_path, settings):
    settings.QP_HOST_TIMEOUT = 3
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    built = Fleet(people, live_server, tmp_path)
    built.start_agent("host-1")
    built.start_agent("host-2")
    loop = SchedulerLoop(period=0.3)
    loop.start()
    yield built
    loop.stop()
    built.stop()


def test_exit_codes_map_to_succeeded_retried_and_failed(fleet):
    ok = fleet.submit(name="ok", command="echo hello; exit 0")
    bad = fleet.submit(name="bad", command="echo oops; exit 3", retry_attempts=2)
    wait_until(lambda: fleet.status(ok) == "SUCCEEDED", what="ok to succeed")
    wait_until(lambda: fleet.status(bad) == "FAILED", what="bad to fail")
    bad = Job.objects.get(pk=bad.pk)
    assert (bad.attempt_count, bad.status_reason) == (2, "Exited with code 3")
    assert [a.exit_code for a in bad.attempts.all()] == [3, 3]
    tail = Placement.objects.filter(attempt__job=ok).get().output_tail
    assert "hello" in tail


def test_concurrent_jobs_on_one_host_see_disjoint_gpus(fleet):
    command = "echo $CUDA_VISIBLE_DEVICES > $QP_CHECKPOINT_DIR/gpus; sleep 3"
    jobs = [fleet.submit(name=f"j{i}", command=command) for i in range(2)]
    wait_until(
        lambda: all(fleet.status(j) == "SUCCEEDED" for j in jobs), what="both jobs to finish"
    )
    hosts = {Placement.objects.get(attempt__job=j).host.name for j in jobs}
    assert hosts == {"host-1"}, "two one-GPU jobs share the fullest host that holds them"
    seen = [fleet.checkpoint("host-1", j).joinpath("gpus").read_text().strip() for j in jobs]
    assert sorted(seen) == ["0", "1"]


def test_a_preempted_job_checkpoints_on_sigterm_and_the_preemptor_starts_after_it_exits(fleet):
    long_job = f"{PYTHON} -m quotaportal.hosts.demo_job --seconds 120"
    borrowers = [fleet.submit(name=f"a{i}", command=long_job) for i in range(4)]
    wait_until(
        lambda: all(fleet.status(j) == "RUNNING" for j in borrowers), what="a to fill all 4 GPUs"
    )
    # RUNNING comes as the process starts; a job can checkpoint once its handler is set,
    # which it says in its first line. (Work is pushed at once: no heartbeat's delay now.)
    wait_until(
        lambda: all("starting at step" in fleet.output(j) for j in borrowers),
        what="the jobs to set their SIGTERM handlers",
    )
    stamp = "date +%s.%N > $QP_CHECKPOINT_DIR/started; sleep 1"
    preemptor = fleet.submit(share="b", name="b1", command=stamp)
    wait_until(lambda: fleet.status(preemptor) == "SUCCEEDED", timeout=40, what="b1 to run")
    victim = next(j for j in borrowers if Job.objects.get(pk=j.pk).preempted_count == 1)
    placement = Placement.objects.filter(attempt__job=victim).first()
    checkpoint = fleet.checkpoint(placement.host.name, victim) / "step"
    assert checkpoint.exists(), "the victim's SIGTERM handler wrote its checkpoint"
    b_placement = Placement.objects.get(attempt__job=preemptor)
    started = float(
        fleet.checkpoint(b_placement.host.name, preemptor).joinpath("started").read_text()
    )
    assert b_placement.host == placement.host
    assert started >= checkpoint.stat().st_mtime, (
        "the preemptor started only after the victim exited"
    )
    placement.refresh_from_db()
    assert "SIGTERM: checkpoint written" in placement.output_tail


def test_a_killed_agent_makes_its_host_lost_and_its_jobs_run_again_elsewhere(fleet):
    job = fleet.submit(name="survivor", command="sleep 4", retry_attempts=3)
    wait_until(lambda: fleet.status(job) == "RUNNING", what="the job to start")
    first_host = Placement.objects.get(attempt__job=job).host.name
    fleet.agents[first_host].send_signal(signal.SIGKILL)
    wait_until(
        lambda: GpuHost.objects.get(name=first_host).state == "LOST", timeout=15, what="host LOST"
    )
    wait_until(
        lambda: fleet.status(job) == "SUCCEEDED", timeout=40, what="the job to finish elsewhere"
    )
    attempts = list(Job.objects.get(pk=job.pk).attempts.order_by("number"))
    assert attempts[0].status_reason == "Host lost"
    assert attempts[-1].placements.get().host.name != first_host
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_multi_host_job_gets_ranks_zero_to_n_minus_one(fleet):
    command = "echo $QP_RANK $QP_WORLD_SIZE $QP_MASTER_ADDR > $QP_CHECKPOINT_DIR/rank-$QP_RANK"
    job = fleet.submit(name="wide", command=command, quantity=3)
    wait_until(lambda: fleet.status(job) == "SUCCEEDED", what="the wide job to finish")
    placements = list(Placement.objects.filter(attempt__job=job).order_by("rank"))
    assert [p.rank for p in placements] == [0, 1]
    assert sorted(len(p.slot_numbers) for p in placements) == [1, 2]
    lines = sorted(
        fleet.checkpoint(p.host.name, job).joinpath(f"rank-{p.rank}").read_text().split()
        for p in placements
    )
    master = placements[0].host.name
    assert lines == [["0", "2", master], ["1", "2", master]]


def test_a_running_jobs_output_is_visible_before_it_ends(fleet):
    job = fleet.submit(name="chatty", command="echo warming-up; sleep 30")
    wait_until(lambda: fleet.status(job) == "RUNNING", what="the job to start")

    def shows_output():
        placement = Placement.objects.filter(attempt__job=job).first()
        return placement is not None and "warming-up" in placement.output_tail

    wait_until(shows_output, timeout=15, what="the output tail while running")
    assert fleet.status(job) == "RUNNING"
