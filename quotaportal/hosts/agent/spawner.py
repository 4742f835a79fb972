"""The agent's side of the spawner (shim.serve): one long-lived process forks each job's shim.

Starting a shim as a new Python process cost every job an interpreter start: on a busy 2-core
host, 16 ms of CPU and most of a trivial job's run. The spawner is started once, with the
lifeline, and forks a shim per request. The agent is not the shim's parent, so a ForkedShim
stands in for subprocess.Popen: the shim's pidfd tells when it is gone, and the exit code is
in the file the shim writes last (none: the shim itself was killed, -9 as Popen would say).

Without pidfds (Linux < 5.3), or once the spawner fails, jobs start as before (Popen).
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

from quotaportal.hosts.agent.shim import child_exit_fd

log = logging.getLogger("quotaportal-agent")
SHIM = Path(__file__).with_name("shim.py")
ANSWER_TIMEOUT = 5.0


def _pidfds_work() -> bool:
    probe = child_exit_fd(os.getpid())
    if probe is None:
        return False
    os.close(probe)
    return True


class SpawnerGone(Exception):
    """The spawner did not answer: this job and later ones start the old way."""


class ForkedShim:
    """What RunningJob needs of a Popen (pid, poll, returncode) for a shim the spawner forked."""

    def __init__(self, pid: int, code_path: Path):
        self.pid = pid
        self.returncode: int | None = None
        self.code_path = code_path
        self._gone = child_exit_fd(pid)  # readable once the shim has exited
        if self._gone is None:  # it exited already (no such pid any more)
            self._finish()

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._gone], [], [], 0)[0]:
            self._finish()
        return self.returncode

    def _finish(self) -> None:
        try:
            self.returncode = int(self.code_path.read_text())
        except (OSError, ValueError):
            self.returncode = -signal.SIGKILL  # killed before it could write its code
        if self._gone is not None:
            os.close(self._gone)
            self._gone = None


class Spawner:
    def __init__(self, lifeline: int):
        self.lifeline = lifeline
        self._sock: socket.socket | None = None
        self._process: subprocess.Popen | None = None
        self.broken = not _pidfds_work()  # then it is never used

    def spawn(
        self, shim_args: list[str], *, cwd: Path, env: dict, log_path: Path, code_path: Path
    ) -> ForkedShim | None:
        """A ForkedShim running the job (`shim_args` as for shim.main), or None when jobs
        must start the old way.

        `code_path` must be where the job cannot write (not its own directory): the shim
        writes there as the agent's user, after the job, and the agent believes what it reads.
        """
        if self.broken:
            return None
        code_path.unlink(missing_ok=True)  # left by an earlier agent's shim of the same rank
        request = {
            "args": shim_args,
            "cwd": str(cwd),
            "env": env,
            "log": str(log_path),
            "code": str(code_path),
        }
        try:
            answer = self._ask(request)
        except (OSError, ValueError, SpawnerGone) as err:
            log.warning("the shim spawner failed (%s); starting shims one process each", err)
            self.close()
            self.broken = True
            return None
        if "error" in answer:
            raise OSError(answer["error"])
        return ForkedShim(answer["pid"], code_path)

    def _ask(self, request: dict) -> dict:
        if self._sock is None:
            self._start()
        self._sock.send(json.dumps(request).encode())
        answer = self._sock.recv(1 << 16)
        if not answer:
            raise SpawnerGone("it closed its socket")
        return json.loads(answer)

    def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.settimeout(ANSWER_TIMEOUT)
        with theirs:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SHIM), "--serve"]
                + [str(self.lifeline), str(theirs.fileno())],
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C is the agent's to handle
                pass_fds=(self.lifeline, theirs.fileno()),
            )
        self._sock = ours

    def close(self) -> None:
        """Stop the spawner (its shims go on: each watches the lifeline itself)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._process is not None:
            try:
                self._process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
