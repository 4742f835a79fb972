"""One rank of a job as a child process group, with graceful stop (SIGTERM, grace, SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

TAIL_BYTES = 4000


class RunningJob:
    def __init__(self, spec: dict, work_dir: Path):
        self.spec = spec
        self.placement = spec["placement"]
        self.gpus = set(spec["gpu_indices"])
        self.grace = float(spec.get("grace_seconds", 30))
        job_dir = work_dir / "jobs" / f"{spec['job_id']}-{spec['attempt']}-{spec['rank']}"
        job_dir.mkdir(parents=True, exist_ok=True)
        checkpoints = work_dir / "checkpoints" / spec["job_id"]
        checkpoints.mkdir(parents=True, exist_ok=True)
        self.log_path = job_dir / "output.log"
        env = {
            **os.environ,
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in spec["gpu_indices"]),
            "QP_JOB_ID": spec["job_id"],
            "QP_ATTEMPT": str(spec["attempt"]),
            "QP_RANK": str(spec["rank"]),
            "QP_WORLD_SIZE": str(spec["world_size"]),
            "QP_MASTER_ADDR": spec["master_addr"],
            "QP_CHECKPOINT_DIR": str(checkpoints),
        }
        with open(self.log_path, "ab") as log:
            # A new session makes the job its own process group, so a stop reaches all of it.
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", spec["command"]],
                cwd=job_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.stop_deadline: float | None = None
        self.output_sent_at = time.monotonic()

    @property
    def stopping(self) -> bool:
        return self.stop_deadline is not None

    def stop(self) -> None:
        """SIGTERM now so the job can checkpoint; SIGKILL once the grace period passes."""
        if self.stop_deadline is None:
            self.stop_deadline = time.monotonic() + self.grace
            self._signal(signal.SIGTERM)

    def enforce_deadline(self) -> None:
        if self.stop_deadline is not None and time.monotonic() >= self.stop_deadline:
            self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def poll(self) -> int | None:
        """The job's exit code once its whole process group is gone, else None.

        The shell that runs the command may exit before its children (a SIGTERM kills the
        shell at once while the training process checkpoints), and the GPUs are only free
        when every process of the job has exited.
        """
        code = self.process.poll()
        if code is None or group_alive(self.process.pid):
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


def group_alive(pgid: int) -> bool:
    """Does any live (non-zombie) process remain in the process group?"""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state, ppid, pgrp, ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
