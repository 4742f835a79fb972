"""One rank of a job as a child process group, with graceful stop (SIGTERM, grace, SIGKILL).

The job never sees the agent: its command is written to a file (no argument-length limit),
it starts with a clean environment (ENV_ALLOWLIST plus its own QP_* variables), optionally
as another user (--run-as), under a shim that stops it if the agent dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from quotaportal.hosts.agent import containment
from quotaportal.hosts.agent.containment import Containment
from quotaportal.hosts.agent.shim import cgroup_populated, child_exit_fd, signal_job
from quotaportal.hosts.agent.spawner import SHIM, Spawner

TAIL_BYTES = 4000
# Variables a job inherits from the agent's environment; everything else (tokens, database
# URLs, secret keys) stays with the agent. Extend with `quotaportal-agent --pass-env NAME`.
ENV_ALLOWLIST = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class StartFailed(Exception):
    """The job could not be started; the attempt fails with this message, the agent goes on."""


@dataclass(frozen=True)
class JobUser:
    """Who jobs run as (`--run-as`); None fields mean the agent's own user."""

    uid: int | None = None
    gid: int | None = None
    name: str = ""

    @classmethod
    def named(cls, name: str) -> JobUser:
        import pwd

        entry = pwd.getpwnam(name)
        return cls(entry.pw_uid, entry.pw_gid, name)


def job_environment(spec: dict, job_dir: Path, checkpoints: Path, user: JobUser, passed) -> dict:
    env = {name: os.environ[name] for name in (*ENV_ALLOWLIST, *passed) if name in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(
        {
            "HOME": str(job_dir),
            "TMPDIR": str(job_dir),
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in spec["gpu_indices"]),
            "QP_JOB_ID": spec["job_id"],
            "QP_ATTEMPT": str(spec["attempt"]),
            "QP_RANK": str(spec["rank"]),
            "QP_WORLD_SIZE": str(spec["world_size"]),
            "QP_MASTER_ADDR": spec["master_addr"],
            "QP_CHECKPOINT_DIR": str(checkpoints),
            "QP_HOST_NAME": spec.get("host_name", ""),
        }
    )
    if spec.get("array_index") is not None:  # a child of a job array: its place in it
        env["QP_ARRAY_INDEX"] = env["AWS_BATCH_JOB_ARRAY_INDEX"] = str(spec["array_index"])
    if user.name:
        env["USER"] = env["LOGNAME"] = user.name
    return env


class RunningJob:
    def __init__(
        self,
        spec: dict,
        work_dir: Path,
        *,
        lifeline: int,
        orphan_grace: float,
        user: JobUser | None = None,
        pass_env: tuple[str, ...] = (),
        spawner: Spawner | None = None,
        contained: Containment | None = None,
    ):
        self.spec = spec
        self.cgroups: list[str] = []
        self.placement = spec["placement"]
        self.gpus = set(spec["gpu_indices"])
        self.grace = float(spec.get("grace_seconds", 30))
        user = user or JobUser()
        job_dir = work_dir / "jobs" / f"{spec['job_id']}-{spec['attempt']}-{spec['rank']}"
        checkpoints = work_dir / "checkpoints" / spec["job_id"]
        self.log_path = job_dir / "output.log"
        self.stop_deadline: float | None = None
        self.output_sent_at = time.monotonic()
        self.lease_lost = False  # stopped because the server could not be reached
        try:
            for folder in (job_dir, checkpoints):
                _make_folder(folder, work_dir)
                if user.uid is not None:
                    os.chown(folder, user.uid, user.gid)
            script = job_dir / "command.sh"
            script.write_text(spec["command"])
            if user.uid is not None:
                os.chown(script, user.uid, user.gid)
            env = job_environment(spec, job_dir, checkpoints, user, pass_env)
            if contained is not None:
                self.cgroups = contained.create(job_dir.name, len(self.gpus))
            shim_args = shim_arguments(orphan_grace, lifeline, script, self.cgroups, user)
            self.process = spawner and spawner.spawn(
                shim_args,
                cwd=job_dir,
                env=env,
                log_path=self.log_path,
                code_path=exit_codes_dir(work_dir) / job_dir.name,
            )
            if self.process is None:
                self.process = start_shim(shim_args, job_dir, env, self.log_path, lifeline)
        except (OSError, ValueError, subprocess.SubprocessError) as err:
            containment.release(self.cgroups)
            raise StartFailed(f"Could not start the job: {err}") from err
        self.started_ticks = process_start_ticks(self.process.pid)
        self.exit_fd = child_exit_fd(self.process.pid)  # readable once the shim has exited

    def release(self) -> None:
        """Close what the agent held to watch the job (it has exited, or is forgotten), and
        remove its cgroup, killing whatever might still be in it."""
        if self.exit_fd is not None:
            os.close(self.exit_fd)
            self.exit_fd = None
        containment.release(self.cgroups)
        self.cgroups = []

    @property
    def stopping(self) -> bool:
        return self.stop_deadline is not None

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM now so the job can checkpoint; SIGKILL once the grace period passes."""
        deadline = time.monotonic() + (self.grace if grace is None else min(grace, self.grace))
        if self.stop_deadline is None or deadline < self.stop_deadline:
            self.stop_deadline = deadline
            self._signal(signal.SIGTERM)

    def enforce_deadline(self) -> None:
        if self.stop_deadline is not None and time.monotonic() >= self.stop_deadline:
            self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        """Signal all of the job: its cgroup (or the shim's descendants) and its group."""
        tracked = self.cgroups[0] if self.cgroups else ""
        signal_job(self.process.pid, sig, tracked, self.process.pid)
        if sig == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)

    def poll(self) -> int | None:
        """The job's exit code once all of it is gone, else None.

        The shim exits only when every process of the job has, but a SIGKILL of the group
        ends the shim first: the GPUs are free only when no process of the job remains, in
        its group or in its cgroup.
        """
        code = self.process.poll()
        if code is None or group_alive(self.process.pid):
            return None
        if self.cgroups and cgroup_populated(self.cgroups[0]):
            return None
        return code

    def output_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - TAIL_BYTES))
                return log.read().decode(errors="replace")
        except OSError:
            return ""


def shim_arguments(
    grace: float, lifeline: int, script: Path, cgroups: list[str], user: JobUser
) -> list[str]:
    """shim.main's arguments: GRACE_SECONDS LIFELINE_FD SCRIPT CGROUPS [UID GID]."""
    owner = [] if user.uid is None else [str(user.uid), str(user.gid)]
    return [str(grace), str(lifeline), str(script), ":".join(cgroups) or "-", *owner]


def start_shim(
    shim_args: list[str], job_dir: Path, env: dict, log_path: Path, lifeline: int
) -> subprocess.Popen:
    """The shim as a process of its own (no spawner, or it failed)."""
    with open(log_path, "ab") as log:
        # A new session makes the shim lead the job's process group, so a stop
        # reaches all of it; -I keeps the job's environment out of the shim's Python.
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(SHIM), *shim_args],
            cwd=job_dir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(lifeline,),
        )


def _make_folder(folder: Path, work_dir: Path) -> None:
    """A rank's or a job's own folder, in the work folder's shared ones (`jobs`,
    `checkpoints`), which are made when missing: a start costs one mkdir per folder, not
    the shared ones' too (this runs before every job on a busy host)."""
    try:
        folder.mkdir(exist_ok=True)
    except FileNotFoundError:
        for shared in (work_dir, work_dir / "jobs", work_dir / "checkpoints"):
            # Jobs of another user may pass through (x) but not list what is there.
            shared.mkdir(parents=True, exist_ok=True)
            shared.chmod(0o711)
        folder.mkdir(exist_ok=True)


def exit_codes_dir(work_dir: Path) -> Path:
    """Where forked shims leave their exit codes: the agent's alone, never a job's."""
    folder = work_dir / "exit-codes"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command: state (3), ppid, pgrp, ... starttime (22).
    return stat[stat.rfind(")") + 2 :].split()


def process_start_ticks(pid: int) -> int | None:
    """When the process started (clock ticks since boot): tells a reused pid from ours."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def group_alive(pgid: int) -> bool:
    """Does any live (non-zombie) process remain in the process group?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # nothing, not even a zombie: the usual answer, without reading /proc
    except PermissionError:
        pass  # a process of another user is in it: it exists
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    # Something is in the group: read every process's state, since a zombie counts for
    # killpg but holds no GPU.
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def kill_group(pgid: int, started_ticks: int | None, wait: float = 5.0) -> bool:
    """SIGKILL a job's group left by an earlier agent, if that pid is still the same process.

    Returns True when something was killed. Waits until the group is gone (its GPUs free).
    """
    if started_ticks is not None and process_start_ticks(pgid) not in (started_ticks, None):
        return False  # the pid was reused by an unrelated process
    if not group_alive(pgid):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + wait
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True
