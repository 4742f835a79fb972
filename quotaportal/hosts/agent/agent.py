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

from quotaportal.hosts.agent import containment
from quotaportal.hosts.agent.client import AgentError, AuthError, Client, Unreachable
from quotaportal.hosts.agent.polling import WORK, HeartbeatPoller, Inbox, merged
from quotaportal.hosts.agent.reporter import Reporter
from quotaportal.hosts.agent.runner import JobUser, RunningJob, StartFailed, kill_group
from quotaportal.hosts.agent.shipper import DEFAULT_SPACE, Shipper
from quotaportal.hosts.agent.spawner import Spawner

log = logging.getLogger("quotaportal-agent")
MAX_BACKOFF = 30.0
DEFAULT_LEASE = 30.0
STATE_FILE = "agent-state.json"
LEASE_LOST = "Stopped by its agent: the agent lost contact with the server"
POLL_STEP = 0.05  # seconds between looks at the jobs: exits are reported within this
LONG_POLL_SECONDS = 10.0


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
        limits: containment.Limits | None = None,
        output_space: int = DEFAULT_SPACE,
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
        self.inbox = Inbox()
        self.reporter = Reporter(client, name, on_work=lambda work: self.inbox.put(WORK, work))
        self.shipper = Shipper(client, name, output_space)  # each rank's whole output
        self.lease = DEFAULT_LEASE
        self.version = ""  # of the placements last heard; a long-poll waits for another
        self.desired: list[dict] = []  # what the server last said should run here
        self.heard_up_to = 0  # the newest placement an answer has covered
        self.last_contact = time.monotonic()
        self.state_changed = False  # jobs started or ended since the state file was written
        # Shims hold the read end; only this process holds the write end. Both are kept out
        # of jobs (close_fds), so the read end sees EOF exactly when this process is gone.
        self.lifeline_read, self._lifeline_write = os.pipe()
        self.spawner = Spawner(self.lifeline_read)  # forks the shims; started on first use
        self.contained = containment.detect(name, work_dir, limits or containment.Limits())
        log.info("containment: %s", self.contained.describe())

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
        """Heartbeats go out one at a time from a poller thread, as long-polls: the server
        answers as soon as what should run here changes. A report whose exits freed GPUs is
        answered with their next work too. Meanwhile this thread sleeps until an answer
        arrives or a job exits (at most POLL_STEP), so an exit is reported at once."""
        poller = HeartbeatPoller(self.client, self.name, self.inbox)
        backoff, next_poll = self.interval, 0.0
        try:
            while not stop.is_set():
                if not poller.busy and time.monotonic() >= next_poll:
                    try:
                        if not registered:
                            self.register()
                            registered = True
                        poller.ask(
                            self.not_done(), self.long_poll_wait(), self.version, self.heard_up_to
                        )
                    except (Unreachable, AgentError) as err:
                        backoff, registered = self.refused(err, backoff, registered)
                        next_poll = time.monotonic() + backoff
                for kind, answer in self.inbox.wait(POLL_STEP, self.exit_fds()):
                    if kind == WORK:
                        self.contact(answer)
                        self.take(answer)
                        continue
                    poller.busy = False
                    if isinstance(answer, Exception):
                        backoff, registered = self.refused(answer, backoff, registered)
                        next_poll = time.monotonic() + backoff
                        continue
                    self.contact(answer)
                    self.take(answer)
                    # A server without long-polls answers at once: then ask once an interval.
                    self.version = answer.get("version", "")
                    backoff = self.interval
                    # A server whose long-poll slots are taken says when to ask again.
                    wait = answer.get("poll_after") or (0 if self.version else self.interval)
                    next_poll = time.monotonic() + min(float(wait), self.lease / 4)
                if self.reporter.auth_error is not None:
                    self.refused(self.reporter.auth_error, backoff, registered)
                self.keep_lease()
                if self.reap():
                    # GPUs a stopped job held are free: a placement waiting for them starts.
                    self.reconcile(self.desired)
                self.save_state_if_changed()
        finally:
            poller.close()
            self.shutdown()
            self.reporter.drain(timeout=2.0)  # the exits of the jobs just stopped
            self.reporter.close()
            self.shipper.close(timeout=2.0)
            self.save_state()  # where each rank's output was shipped to

    def take(self, answer: dict) -> None:
        """Run what an answer says should run here, merged with what earlier ones said."""
        horizon = answer.get("horizon")
        if horizon is None:  # a server that answers on one path only
            self.desired = answer["placements"]
        else:
            self.desired = merged(self.desired, answer["placements"], horizon, self.heard_up_to)
            self.heard_up_to = max(self.heard_up_to, horizon)
        self.reconcile(self.desired)

    def not_done(self) -> list[int]:
        """What a heartbeat says this agent runs: its running ranks, those whose reports are
        still on their way, and those it may yet start. The server closes the other ranks of
        ended attempts (one preempted before it started gets no report), so a rank whose exit
        report is queued here is dated by that report, not at the heartbeat's later arrival;
        and a rank waiting here for its GPUs stays open until an answer has told this agent
        not to start it (else it might start, on what it last heard, after its close)."""
        return sorted(self.running.keys() | self.reporter.unanswered() | self.may_start())

    def may_start(self) -> set[int]:
        """The ranks the last answer placed here that have not started: reconcile starts each
        as soon as its GPUs are free (a held one waits for a later answer)."""
        return {
            spec["placement"]
            for spec in self.desired
            if spec["placement"] not in self.running
            and spec["placement"] not in self.finished
            and not spec.get("hold")
        }

    def exit_fds(self) -> list[int]:
        """The pidfds of the jobs still running: the loop wakes the moment one exits."""
        return [
            job.exit_fd
            for job in self.running.values()
            if job.exit_fd is not None and job.process.returncode is None
        ]

    def long_poll_wait(self) -> float:
        """Short enough that an answer always comes well inside the lease."""
        return min(LONG_POLL_SECONDS, self.lease / 4)

    def refused(self, err: Exception, backoff: float, registered: bool) -> tuple[float, bool]:
        """Handle a failed request: the next backoff, and whether the host is still registered."""
        if isinstance(err, AuthError):
            log.error("the server refused this agent's token: stopping every job")
            raise err
        if isinstance(err, Unreachable):
            log.warning("server unreachable (%s); retrying in %.1f s", err, backoff)
        elif "register" not in str(err):
            # A refused heartbeat is the server's word on this request only; the lease
            # still guards the jobs if refusals go on.
            log.warning("heartbeat refused (%s); retrying in %.1f s", err, backoff)
        else:
            log.warning("%s", err)
            # The server failed these jobs over already: none may go on beside a retry.
            self.abandon_jobs()
            self.version, self.desired = "", []
            return self.interval, False
        return min(backoff * 2, MAX_BACKOFF, self.lease / 4), registered

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
            if placement in self.running or placement in self.finished or spec.get("hold"):
                continue  # a held placement waits for its job's earlier attempt to end
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
                spawner=self.spawner,
                contained=self.contained,
            )
        except StartFailed as err:
            # One job's bad command or a full disk fails that attempt, never the agent.
            log.error("job %s rank %s: %s", spec["job_id"], spec["rank"], err)
            self.finished.add(placement)
            self.send(placement, "exited", None, "", str(err))
            return
        self.running[placement] = job
        self.shipper.follow(placement, job.log_path)
        self.state_changed = True
        log.info(
            "started job %s rank %s on GPUs %s", spec["job_id"], spec["rank"], spec["gpu_indices"]
        )
        self.send(placement, "started")

    def reap(self) -> int:
        """Report the jobs that exited; how many did."""
        exited = 0
        for placement, job in list(self.running.items()):
            code = job.poll()
            if code is None:
                self.share_output(placement, job)
                continue
            exited += 1
            job.release()
            del self.running[placement]
            self.finished.add(placement)
            self.state_changed = True
            log.info("job %s rank %s exited with %s", job.spec["job_id"], job.spec["rank"], code)
            reason = LEASE_LOST if job.lease_lost else ""
            ends_at = self.shipper.ended(placement)
            self.send(placement, "exited", code, job.output_tail(), reason, ends_at)
        return exited

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
        output_ends_at: int | None = None,
    ) -> None:
        """Hand a report to the reporter thread: it goes out at once, without holding up the
        loop, and is kept (in order) while the server cannot be reached. `output_ends_at`: an
        exit's whole output is with the portal, ending at this byte (Shipper.ended)."""
        report = {"placement": placement, "event": event, "exit_code": exit_code}
        report.update(output_tail=tail, reason=reason)
        if output_ends_at is not None:
            report["output_ends_at"] = output_ends_at
        self.reporter.put(report)

    def abandon_jobs(self) -> None:
        """Kill every job at once and forget it (the server no longer counts it as running)."""
        for placement, job in list(self.running.items()):
            kill_group(job.process.pid, job.started_ticks)
            job.process.poll()
            job.release()
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
        self.save_state_if_changed()
        self.spawner.close()

    # -- the state file: what a restarted agent must stop first --------------------------

    @property
    def state_path(self) -> Path:
        return self.work_dir / STATE_FILE

    def save_state_if_changed(self) -> None:
        """Once per turn of the loop, not per start or exit: a rename is a journalled
        metadata write (about 2 ms on a busy host), and an answer starts several jobs at once.
        A job not yet in the file when the agent dies is stopped by its shim's lifeline."""
        if self.state_changed:
            self.save_state()

    def save_state(self) -> None:
        self.state_changed = False
        jobs = [
            {"placement": p, "pgid": j.process.pid, "started": j.started_ticks}
            for p, j in self.running.items()
        ]
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"jobs": jobs, "output": self.shipper.saved()}))
        os.replace(temporary, self.state_path)  # never a half-written file after a crash

    def stop_orphans(self) -> int:
        """Stop the jobs an earlier agent in this work dir left running; how many there were."""
        try:
            state = json.loads(self.state_path.read_text())
            saved = state["jobs"]
            self.shipper.restore(state.get("output") or {})
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
        # What escaped its group is still in its cgroup.
        stopped += self.contained.stop_leftovers()
        self.save_state()
        return stopped
