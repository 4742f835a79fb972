"""The supervisor between the agent and one rank of a job (like containerd's shim).

    python -I shim.py GRACE_SECONDS LIFELINE_FD SCRIPT [UID GID]

It leads the job's process group and runs `/bin/sh SCRIPT` in it. It holds the read end of a
pipe whose write end only the agent holds: when the agent dies, even by `kill -9`, the pipe
reads end-of-file and the shim stops the whole group (SIGTERM, then SIGKILL after the grace
period), so no job outlives its agent and later runs twice beside its own retry.

With UID and GID the job runs as that user (`quotaportal-agent --run-as`); the shim stays
with the agent's user, so it can always stop the job, and the job cannot read the agent's
token file or its /proc entries.

It exits with the job's exit code (128 + N for a job killed by signal N) once no other
process of the group is left, so the agent's view of "exited" means "the GPUs are free".
Standard library only, and only its lightest modules: the shim starts once per job, so its
start-up is every short job's cost (`subprocess` and `signal`, which imports `enum`, would
triple it).
"""

from __future__ import annotations

import os
import select
import sys
import time

try:  # the C module behind `signal`: the same calls, without importing enum
    import _signal as signal
except ImportError:  # another Python implementation
    import signal

POLL_SECONDS = 0.2
LINGER_SECONDS = 0.01  # between looks for the job's leftover processes once it has exited


def others_alive(pgid: int, me: int) -> bool:
    """Does a live (non-zombie) process other than the shim remain in the group?"""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def lifeline_cut(fd: int, timeout: float, also: list[int] = ()) -> bool:
    """Wait up to `timeout` for the lifeline (or any of `also`); True when the agent is gone."""
    readable, _, _ = select.select([fd, *also], [], [], timeout)
    # Readable means end-of-file: the agent never writes, it only holds the other end.
    return fd in readable and os.read(fd, 1) == b""


def stop_group(pgid: int, grace: float) -> None:
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and others_alive(pgid, os.getpid()):
        time.sleep(POLL_SECONDS)
    os.killpg(pgid, signal.SIGKILL)  # ends the shim too


def main(argv: list[str]) -> int:
    grace, lifeline, script = float(argv[0]), int(argv[1]), argv[2]
    as_user = (int(argv[3]), int(argv[4])) if len(argv) == 5 else None
    # The agent stops a job with killpg(SIGTERM): the shim must outlive it to report the code.
    # A handler (not SIG_IGN) so the job itself still gets the default action after exec.
    signal.signal(signal.SIGTERM, lambda *_: None)
    pgid = os.getpgid(0)
    child = start_job(script, as_user)
    exited = child_exit_fd(child)
    code = None
    while True:
        if code is None:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                code = exit_code(status)
        if code is not None and not others_alive(pgid, os.getpid()):
            return code
        # Wake the moment the job exits (its pidfd turns readable), not at the next poll; once
        # it has, look often for the rest of its group to be gone.
        watched = [exited] if code is None and exited is not None else []
        if lifeline_cut(lifeline, POLL_SECONDS if code is None else LINGER_SECONDS, watched):
            stop_group(pgid, grace)


def start_job(script: str, as_user: tuple[int, int] | None) -> int:
    """Fork and exec `/bin/sh SCRIPT` in the shim's group; the child's pid.

    The job keeps only stdin, stdout and stderr: it must never hold the lifeline, or the
    agent's death would not reach the shim while the job lives.
    """
    pid = os.fork()
    if pid:
        return pid
    try:
        os.closerange(3, MAX_FD)
        if as_user is not None:
            uid, gid = as_user
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        os.execv("/bin/sh", ["/bin/sh", script])  # caught signals return to default
    except BaseException:
        os.write(2, b"quotaportal shim: could not start the job\n")
    os._exit(127)


MAX_FD = 65536


def child_exit_fd(pid: int) -> int | None:
    """A file descriptor that turns readable when the process exits (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # nothing to flush or tear down: skip the finalization
