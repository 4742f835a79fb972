"""The agent loop: register, then heartbeat; run what the server wants, stop what it no
longer wants, and report starts and exits. Desired-state reconciliation, so a lost reply or
a restart of either side is repaired by the next heartbeat."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from quotaportal.hosts.agent.client import AgentError, Client, Unreachable
from quotaportal.hosts.agent.runner import RunningJob

log = logging.getLogger("quotaportal-agent")
MAX_BACKOFF = 30.0


class Agent:
    def __init__(
        self,
        client: Client,
        *,
        name: str,
        capacity_unit: str,
        gpus: list[int],
        work_dir: Path,
        address: str,
        interval: float = 1.0,
        output_every: float = 5.0,
    ):
        self.client = client
        self.name = name
        self.capacity_unit = capacity_unit
        self.gpus = gpus
        self.work_dir = work_dir
        self.address = address
        self.interval = interval
        self.output_every = output_every
        self.running: dict[int, RunningJob] = {}
        self.finished: set[int] = set()
        self.unreported: list[tuple] = []  # reports to retry once the server is back

    def register(self) -> dict:
        answer = self.client.register(self.name, self.capacity_unit, self.gpus, self.address)
        log.info(
            "registered %s: %s slot(s) of %s", self.name, answer["slots"], answer["capacity_unit"]
        )
        return answer

    def run(self, stop: threading.Event, registered: bool = True) -> None:
        backoff = self.interval
        while not stop.is_set():
            try:
                if not registered:
                    self.register()
                    registered = True
                self.flush_reports()
                self.reconcile(self.client.heartbeat(self.name))
                backoff = self.interval
            except Unreachable as err:
                log.warning(
                    "server unreachable (%s); retrying in %.1f s, jobs keep running", err, backoff
                )
                backoff = min(backoff * 2, MAX_BACKOFF)
            except AgentError as err:
                if "register" not in str(err):
                    raise
                log.warning("%s", err)
                registered = False
            self.reap()
            stop.wait(backoff)
        self.shutdown()

    def reconcile(self, desired: list[dict]) -> None:
        wanted = {spec["placement"]: spec for spec in desired}
        for placement, job in self.running.items():
            if placement not in wanted:
                job.stop()
            job.enforce_deadline()
        for placement, spec in wanted.items():
            if placement in self.running or placement in self.finished:
                continue
            busy = set().union(*(j.gpus for j in self.running.values())) if self.running else set()
            if busy & set(spec["gpu_indices"]):
                continue  # a preempted job still holds these GPUs: start once it has exited
            self.running[placement] = RunningJob(spec, self.work_dir)
            log.info(
                "started job %s rank %s on GPUs %s",
                spec["job_id"],
                spec["rank"],
                spec["gpu_indices"],
            )
            self.send(placement, "started")

    def reap(self) -> None:
        for placement, job in list(self.running.items()):
            code = job.poll()
            if code is None:
                self.share_output(placement, job)
                continue
            del self.running[placement]
            self.finished.add(placement)
            log.info("job %s rank %s exited with %s", job.spec["job_id"], job.spec["rank"], code)
            self.send(placement, "exited", code, job.output_tail())

    def share_output(self, placement: int, job: RunningJob) -> None:
        """While a job runs, send the tail of its output now and then (the job page shows it)."""
        now = time.monotonic()
        if now - job.output_sent_at >= self.output_every:
            job.output_sent_at = now
            self.send(placement, "output", None, job.output_tail())

    def send(
        self, placement: int, event: str, exit_code: int | None = None, tail: str = ""
    ) -> None:
        try:
            self.client.report(self.name, placement, event, exit_code, tail)
        except Unreachable:
            self.unreported.append((placement, event, exit_code, tail))
        except AgentError as err:  # e.g. the job's placement is gone: nothing left to tell
            log.warning("report for placement %s dropped: %s", placement, err)

    def flush_reports(self) -> None:
        pending, self.unreported = self.unreported, []
        for report in pending:
            self.send(*report)

    def shutdown(self) -> None:
        for job in self.running.values():
            job.stop()
        deadline = time.monotonic() + max((j.grace for j in self.running.values()), default=0)
        while self.running and time.monotonic() < deadline + 1:
            self.reap()
            for job in self.running.values():
                job.enforce_deadline()
            time.sleep(0.1)
