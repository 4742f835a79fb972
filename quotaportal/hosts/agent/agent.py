"""The agent loop: register, then heartbeat; run what the server wants, stop what it no
longer wants, and report starts and exits. Desired-state reconciliation, so a lost reply or
a restart of either side is repaired by the next heartbeat.

A job never runs twice at once:
- the agent holds a lease: when it cannot reach the server for half the host timeout the
  server announced, it stops its jobs itself, before the server declares the host LOST and
  retries them elsewhere;
- each job runs under a shim that stops it if the agent dies (even by kill -9);
- the agent records the jobs it started in a state file in its work dir, and a restarted
  agent stops any it finds alive before it registers.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from quotaportal.hosts.agent.client import AgentError, AuthError, Client, Unreachable
from quotaportal.hosts.agent.runner import JobUser, RunningJob, StartFailed, kill_group

log = logging.getLogger("quotaportal-agent")
MAX_BACKOFF = 30.0
DEFAULT_LEASE = 30.0
STATE_FILE = "agent-state.json"
LEASE_LOST = "Stopped by its agent: the agent lost contact with the server"


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
        user: JobUser | None = None,
        pass_env: tuple[str, ...] = (),
    ):
        self.client = client
        self.name = name
        self.capacity_unit = capacity_unit
        self.gpus = gpus
        self.work_dir = work_dir
        self.address = address
        self.interval = interval
        self.output_every = output_every
        self.user = user or JobUser()
        self.pass_env = pass_env
        self.running: dict[int, RunningJob] = {}
        self.finished: set[int] = set()
        self.unreported: list[tuple] = []  # reports to retry once the server is back
        self.lease = DEFAULT_LEASE
        self.last_contact = time.monotonic()
        # Shims hold the read end; only this process holds the write end. Both are kept out
        # of jobs (close_fds), so the read end sees EOF exactly when this process is gone.
        self.lifeline_read, self._lifeline_write = os.pipe()

    # -- lifecycle ---------------------------------------------------------------------

    def register(self) -> dict:
        self.stop_orphans()
        answer = self.client.register(self.name, self.capacity_unit, self.gpus, self.address)
        self.contact(answer)
        log.info(
            "registered %s: %s slot(s) of %s", self.name, answer["slots"], answer["capacity_unit"]
        )
        return answer

    def contact(self, answer: dict) -> None:
        self.last_contact = time.monotonic()
        self.lease = float(answer.get("lease_seconds", self.lease))

    def run(self, stop: threading.Event, registered: bool = True) -> None:
        backoff = self.interval
        while not stop.is_set():
            try:
                if not registered:
                    self.register()
                    registered = True
                self.flush_reports()
                answer = self.client.heartbeat(self.name, sorted(self.running))
                self.contact(answer)
                self.reconcile(answer["placements"])
                backoff = self.interval
            except Unreachable as err:
                log.warning("server unreachable (%s); retrying in %.1f s", err, backoff)
                backoff = min(backoff * 2, MAX_BACKOFF, self.lease / 4)
            except AuthError:
                log.error("the server refused this agent's token: stopping every job")
                self.shutdown()
                raise
            except AgentError as err:
                if "register" not in str(err):
                    # A refused heartbeat is the server's word on this request only; the
                    # lease still guards the jobs if refusals go on.
                    log.warning("heartbeat refused (%s); retrying in %.1f s", err, backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF, self.lease / 4)
                else:
                    log.warning("%s", err)
                    # The server failed these jobs over already: none may go on beside a retry.
                    self.abandon_jobs()
                    registered = False
            self.keep_lease()
            self.reap()
            stop.wait(backoff)
        self.shutdown()

    def keep_lease(self) -> None:
        """Out of contact for half the lease: stop every job before the server gives up."""
        silent = time.monotonic() - self.last_contact
        if silent < self.lease / 2 or not self.running:
            return
        log.error(
            "no answer from the server for %.0f s (lease %.0f s): stopping %d job(s)",
            silent,
            self.lease,
            len(self.running),
        )
        for job in self.running.values():
            job.lease_lost = True
            job.stop(grace=self.lease / 4)

    # -- jobs --------------------------------------------------------------------------

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
            self.start(placement, {**spec, "host_name": self.name})

    def start(self, placement: int, spec: dict) -> None:
        try:
            job = RunningJob(
                spec,
                self.work_dir,
                lifeline=self.lifeline_read,
                orphan_grace=max(1.0, min(spec.get("grace_seconds", 30), self.lease / 4)),
                user=self.user,
                pass_env=self.pass_env,
            )
        except StartFailed as err:
            # One job's bad command or a full disk fails that attempt, never the agent.
            log.error("job %s rank %s: %s", spec["job_id"], spec["rank"], err)
            self.finished.add(placement)
            self.send(placement, "exited", None, "", str(err))
            return
        self.running[placement] = job
        self.save_state()
        log.info(
            "started job %s rank %s on GPUs %s", spec["job_id"], spec["rank"], spec["gpu_indices"]
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
            self.save_state()
            log.info("job %s rank %s exited with %s", job.spec["job_id"], job.spec["rank"], code)
            reason = LEASE_LOST if job.lease_lost else ""
            self.send(placement, "exited", code, job.output_tail(), reason)

    def share_output(self, placement: int, job: RunningJob) -> None:
        """While a job runs, send the tail of its output now and then (the job page shows it)."""
        now = time.monotonic()
        if now - job.output_sent_at >= self.output_every:
            job.output_sent_at = now
            self.send(placement, "output", None, job.output_tail())

    def send(
        self,
        placement: int,
        event: str,
        exit_code: int | None = None,
        tail: str = "",
        reason: str = "",
    ) -> None:
        try:
            self.client.report(self.name, placement, event, exit_code, tail, reason)
        except Unreachable:
            self.unreported.append((placement, event, exit_code, tail, reason))
        except AuthError:
            raise
        except AgentError as err:  # e.g. the job's placement is gone: nothing left to tell
            log.warning("report for placement %s dropped: %s", placement, err)

    def flush_reports(self) -> None:
        pending, self.unreported = self.unreported, []
        for report in pending:
            self.send(*report)

    def abandon_jobs(self) -> None:
        """Kill every job at once and forget it (the server no longer counts it as running)."""
        for placement, job in list(self.running.items()):
            kill_group(job.process.pid, job.started_ticks)
            job.process.poll()
            self.finished.add(placement)
        self.running.clear()
        self.save_state()

    def shutdown(self) -> None:
        """Stop every job at once, so their grace periods run side by side."""
        # The server may be going away too (as in `manage.py demo`): exit reports must not
        # hold up the stop for a full request timeout each.
        self.client.timeout = min(self.client.timeout, 1.0)
        for job in self.running.values():
            job.stop()
        deadline = time.monotonic() + max((j.grace for j in self.running.values()), default=0)
        while self.running and time.monotonic() < deadline + 1:
            self.reap()
            for job in self.running.values():
                job.enforce_deadline()
            time.sleep(0.1)

    # -- the state file: what a restarted agent must stop first --------------------------

    @property
    def state_path(self) -> Path:
        return self.work_dir / STATE_FILE

    def save_state(self) -> None:
        jobs = [
            {"placement": p, "pgid": j.process.pid, "started": j.started_ticks}
            for p, j in self.running.items()
        ]
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"jobs": jobs}))
        os.replace(temporary, self.state_path)  # never a half-written file after a crash

    def stop_orphans(self) -> int:
        """Stop the jobs an earlier agent in this work dir left running; how many there were."""
        try:
            saved = json.loads(self.state_path.read_text())["jobs"]
        except (OSError, ValueError, KeyError, TypeError):
            saved = []
        own = {j.process.pid for j in self.running.values()}
        stopped = 0
        for entry in saved:
            if entry.get("pgid") in own or not isinstance(entry.get("pgid"), int):
                continue
            if kill_group(entry["pgid"], entry.get("started")):
                stopped += 1
                log.warning("stopped job group %s left by an earlier agent", entry["pgid"])
        self.save_state()
        return stopped
