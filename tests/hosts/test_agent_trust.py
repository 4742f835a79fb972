"""Agents isolated from jobs, agents that never die of a job, and jobs that never run twice:
real quotaportal-agent processes against a live server on PostgreSQL, killed with kill -9 and
cut off from the server."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from quotaportal.hosts.agent.agent import STATE_FILE
from quotaportal.hosts.models import GpuHost, Placement
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.hosts.builders import Fleet, pid_alive, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


class ManualFleet(Fleet):
    """Agents against the live server, ticked by hand so a test controls every step."""

    def __init__(self, people, live_server, tmp_path):
        shares = (("a", "vision", 8, "LEND_AND_BORROW"),)
        super().__init__(people, live_server, tmp_path, grace=2, shares=shares)
        # A work dir every user may pass through, for jobs run as another user.
        self.shared = Path(tempfile.mkdtemp(prefix="qp-trust-", dir="/tmp"))
        self.shared.chmod(0o711)

    def work_dir(self, name: str) -> Path:
        return self.shared / name

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.shared, ignore_errors=True)  # outside tmp_path: nobody else would

    def tick(self) -> None:
        run_tick(self.queue.id)

    def run_until(self, job, status: str, timeout: float = 30.0) -> None:
        def reached():
            self.tick()
            return self.status(job) == status

        wait_until(reached, timeout=timeout, what=f"{job.name} to be {status}")


@pytest.fixture
def manual(people, live_server, tmp_path, settings):
    settings.QP_HOST_TIMEOUT = 4
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    built = ManualFleet(people, live_server, tmp_path)
    yield built
    built.stop()


def read_pid(path: Path) -> int:
    wait_until(lambda: path.exists() and path.read_text().strip(), what=f"{path} to be written")
    return int(path.read_text())


def run_sleeper(manual, name: str) -> tuple[Job, int]:
    """A job that sleeps two minutes, RUNNING; and its process id."""
    marker = manual.shared / f"{name}.pid"
    job = manual.submit(name=name, command=f"echo $$ > {marker}; exec sleep 120", retry_attempts=2)
    manual.run_until(job, "RUNNING")
    return job, read_pid(marker)


def test_a_job_that_cannot_start_fails_alone_and_the_agent_keeps_serving(manual):
    manual.start_agent("host-1", 2)
    broken = manual.submit(name="broken", command="echo never")
    fine = manual.submit(name="fine", command="echo fine")
    # A file where the job's checkpoint folder must go: creating it fails, as a full disk,
    # a read-only mount or too many open files would.
    blocked = manual.work_dir("host-1") / "checkpoints" / str(broken.pk)
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("in the way")
    manual.run_until(fine, "SUCCEEDED")
    manual.run_until(broken, "FAILED")
    broken.refresh_from_db()
    assert broken.status_reason.startswith("Could not start the job:")
    assert manual.agents["host-1"].poll() is None, "the agent is still running"
    assert GpuHost.objects.get(name="host-1").state == "READY"
    after = manual.submit(name="after", command="true")
    manual.run_until(after, "SUCCEEDED")


def test_a_job_sees_neither_the_agents_secrets_nor_its_token(manual, monkeypatch):
    monkeypatch.setenv("QP_SECRET_KEY", "server-secret-key")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:db-password@db/x")
    manual.start_agent("host-1", 2)
    token = manual.tokens["host-1"]
    spy = manual.submit(
        name="spy",
        command="env > $QP_CHECKPOINT_DIR/env; "
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
        " > $QP_CHECKPOINT_DIR/cmdlines 2>/dev/null; true",
    )
    manual.run_until(spy, "SUCCEEDED")
    seen = manual.checkpoint("host-1", spy)
    environment = (seen / "env").read_text()
    assert "QP_JOB_ID=" in environment
    assert "CUDA_VISIBLE_DEVICES=" in environment
    for secret in (token, "server-secret-key", "db-password", "QP_AGENT_TOKEN"):
        assert secret not in environment
    cmdlines = (seen / "cmdlines").read_text()
    assert "quotaportal.hosts.agent" in cmdlines, "the agent's command line was visible"
    assert token not in cmdlines, "no command line on the host carries the token"


def test_a_job_run_as_another_user_cannot_read_the_token_file_or_the_agents_environment(
    manual,
):
    nobody = pwd.getpwnam("nobody")
    token_file = manual.shared / "agent.token"
    token_file.write_text(manual.token_for("host-1"))
    token_file.chmod(0o600)
    manual.tokens["host-1"] = "unused-because-the-file-wins"
    manual.start_agent("host-1", 2, "--token-file", str(token_file), "--run-as", "nobody")
    agent_pid = manual.agents["host-1"].pid
    thief = manual.submit(
        name="thief",
        command=f"id -u > $QP_CHECKPOINT_DIR/uid; "
        f"cat {token_file} > $QP_CHECKPOINT_DIR/token 2>&1; "
        f"cat /proc/{agent_pid}/environ > $QP_CHECKPOINT_DIR/environ 2>&1; true",
    )
    manual.run_until(thief, "SUCCEEDED")
    seen = manual.checkpoint("host-1", thief)
    assert (seen / "uid").read_text().strip() == str(nobody.pw_uid)
    assert "Permission denied" in (seen / "token").read_text()
    assert "Permission denied" in (seen / "environ").read_text()
    assert token_file.read_text() not in (seen / "token").read_text()


def test_a_killed_agents_jobs_stop_and_the_retry_never_runs_beside_them(manual):
    manual.start_agent("host-1", 2)
    manual.start_agent("host-2", 2)
    ledger = manual.shared / "ledger"
    ledger.mkdir(mode=0o777)
    # flock fails at once if another copy of this job holds the lock: that is a double run.
    command = (
        f"echo $$ > {ledger}/$QP_JOB_ID-$QP_ATTEMPT.pid; "
        f"flock -n {ledger}/$QP_JOB_ID.lock sleep 8 || echo twice >> {ledger}/doubles"
    )
    job = manual.submit(name="survivor", command=command, retry_attempts=3)
    manual.run_until(job, "RUNNING")
    first_host = Placement.objects.get(attempt__job=job).host.name
    pid = read_pid(ledger / f"{job.pk}-1.pid")
    manual.agents[first_host].send_signal(signal.SIGKILL)
    # The shim sees its lifeline cut and stops the job at once (grace capped by the lease).
    wait_until(lambda: not pid_alive(pid), timeout=10, what="the orphaned job to stop")
    manual.run_until(job, "SUCCEEDED", timeout=60)
    attempts = list(Job.objects.get(pk=job.pk).attempts.order_by("number"))
    assert attempts[0].status_reason == "Host lost"
    assert attempts[-1].placements.get().host.name != first_host
    assert not (ledger / "doubles").exists(), "the job never ran twice at once"


def test_a_restarted_agent_stops_the_jobs_an_earlier_one_left_before_it_registers(manual):
    manual.start_agent("host-1", 2)
    job, pid = run_sleeper(manual, "orphan")
    shim = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])  # its pgid
    # The agent notes its jobs once a turn, after it reports their start: a crash before that
    # leaves the job to its shim's lifeline (its own test, above), not to the next agent.
    saved = manual.work_dir("host-1") / STATE_FILE
    wait_until(
        lambda: (
            saved.exists() and shim in {j["pgid"] for j in json.loads(saved.read_text())["jobs"]}
        ),
        what="the agent to note the job in its state file",
    )
    # The worst case: the agent and the job's shim both die, so nothing stops the job...
    os.kill(shim, signal.SIGKILL)
    manual.agents["host-1"].send_signal(signal.SIGKILL)
    manual.agents["host-1"].wait(5)
    assert pid_alive(pid), "the job outlived its agent and its shim"
    # ...until an agent starts again in the same work dir: it stops the job, then registers.
    # Registering ends the attempts still open on the host: that, not the host's heartbeat
    # time, marks the registration (the dead agent's long poll, still waiting in the server,
    # stamps the heartbeat when its wait ends).
    manual.start_agent("host-1", 2)
    wait_until(
        lambda: job.attempts.filter(number=1, stopped_at__isnull=False).exists(),
        what="the new agent to register",
    )
    assert not pid_alive(pid), "stopped before the agent registered"
    # The retry may already be dispatched again (the new agent's own requests tick), so the
    # job is judged by its attempts.
    first = job.attempts.get(number=1)
    assert first.status_reason == "Host lost"
    assert Job.objects.get(pk=job.pk).status not in ("FAILED", "SUCCEEDED")


class Cutoff:
    """A TCP relay in front of the live server that the test can cut, as a network would."""

    def __init__(self, target: str):
        host, port = target.split("//", 1)[1].split(":")
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open = threading.Event()
        self.open.set()
        self.relayed: set[socket.socket] = set()
        threading.Thread(target=self.accept, daemon=True).start()

    def cut(self):
        """No more connections, and those open end: a kept-alive one too."""
        self.open.clear()
        for connection in list(self.relayed):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open.is_set():
                client.close()
                continue
            threading.Thread(target=self.relay, args=(client,), daemon=True).start()

    def relay(self, client):
        with client, socket.create_connection(self.target) as server:
            self.relayed.add(client)
            upstream = threading.Thread(target=self.pipe, args=(client, server), daemon=True)
            upstream.start()
            self.pipe(server, client)
            upstream.join(5)
            self.relayed.discard(client)

    @staticmethod
    def pipe(source, sink):
        """Copy one direction until it ends (a request may come in several packets)."""
        try:
            while chunk := source.recv(1 << 16):
                sink.sendall(chunk)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def test_an_agent_out_of_contact_stops_its_jobs_before_the_server_gives_up_on_it(manual):
    relay = Cutoff(manual.url)
    manual.url = relay.url
    manual.start_agent("host-1", 2)
    job, pid = run_sleeper(manual, "leased")
    relay.cut()  # the server stops answering this agent
    # Lease 4 s: the agent stops its jobs after 2 s of silence, before the host is LOST at 4 s.
    wait_until(lambda: not pid_alive(pid), timeout=8, what="the agent to stop its job")
    assert GpuHost.objects.get(name="host-1").state == "READY", "before the server gave up"
    relay.open.set()

    def failed_over():
        job.refresh_from_db()
        return job.attempts.filter(stopped_at__isnull=False).exists()

    wait_until(failed_over, timeout=20, what="the stopped attempt to be reported")
    first = job.attempts.order_by("number").first()
    assert "lost contact with the server" in first.status_reason
