"""Builders the agent-side tests share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.db import connection

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import GpuHost, Placement
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from tests.builders import add_share, build_queue

TWO_SHARES = (("a", "vision", 2, "LEND_AND_BORROW"), ("b", "nlp", 2, "LEND"))


def pid_alive(pid: int) -> bool:
    """Is the process there and not a zombie (ended, whoever reaps it)?"""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def rank(placement: int, command: str, gpu: int = 0) -> dict:
    """What an answer lists for one rank, as RunningJob takes it."""
    return {
        "placement": placement,
        "job_id": f"job-{placement}",
        "attempt": 1,
        "rank": 0,
        "world_size": 1,
        "master_addr": "",
        "gpu_indices": [gpu],
        "command": command,
        "grace_seconds": 1,
        "hold": False,
    }


def wait_until(check, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Fleet:
    def __init__(
        self, people, live_server, tmp_path, *, grace: int = 5, shares=TWO_SHARES, capacity=8
    ):
        self.env, self.queue = build_queue(
            people.admin,
            unit="gpu1",
            capacity=capacity,
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


class Waiting:
    """A heartbeat long-polling in another thread, as a web worker serves it."""

    def __init__(self, token, name, known):
        self.answer = None
        self.thread = threading.Thread(target=self._run, args=(token, name, known), daemon=True)
        self.thread.start()

    def _run(self, token, name, known):
        try:
            self.answer = host_services.heartbeat(token, name, [], wait=LONG, known=known)
        finally:
            connection.close()

    def result(self, within: float) -> dict | None:
        self.thread.join(within)
        return None if self.thread.is_alive() else self.answer


LONG = 30.0  # longer than any answer may take when it is woken (capped by the server)
