"""The supervisor between the agent and one rank of a job (like containerd's shim).

    python -I -S shim.py GRACE_SECONDS LIFELINE_FD SCRIPT [UID GID]
    python -I -S shim.py --serve LIFELINE_FD SOCKET_FD      (the spawner, see serve())

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


def job_left(pgid: int, reaper: bool) -> bool:
    """Is a live process of the job's group left once its first process has exited?"""
    if reaper and no_descendants():
        return False  # the usual answer, without reading every process's state
    return others_alive(pgid, os.getpid())


def no_descendants() -> bool:
    """For a shim that is its job's subreaper: every process the job left behind became the
    shim's child, so no child at all (reaping the exited ones) means nothing is left."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
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


def main(argv: list[str], reaper: bool = False) -> int:
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
        if code is not None and not job_left(pgid, reaper):
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


def serve(lifeline: int, channel: int) -> int:
    """The spawner: one long-lived process that forks a shim per job on the agent's request.

    A new Python per job cost every short job its interpreter's start (16 ms of CPU on a busy
    2-core host, and most of a trivial job's run); a fork of this small single-threaded
    process costs about a millisecond. Each request is one JSON message on a SOCK_SEQPACKET
    socket: {args (as main's), cwd, env, log, code}; the answer is {"pid": N} or
    {"error": text}. The forked shim runs main() as a shim started alone would, then writes
    its exit code to the `code` file, since the agent is not its parent: the agent waits on
    the shim's pidfd and reads that file (no file: the shim was killed). Children are reaped
    by the kernel (SIGCHLD ignored here). It exits when the agent closes the socket or dies.
    """
    import ctypes  # here, not at the top: a shim started alone must not pay for them
    import json
    import socket

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    sock = socket.socket(fileno=channel)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        readable, _, _ = select.select([sock, lifeline], [], [])
        if lifeline in readable and os.read(lifeline, 1) == b"":
            return 0
        if sock not in readable:
            continue
        message = sock.recv(1 << 20)
        if not message:
            return 0
        try:
            pid = fork_shim(json.loads(message), lifeline, sock, prctl)
            answer = {"pid": pid}
        except Exception as err:  # one bad request fails that job, not the spawner
            answer = {"error": f"{type(err).__name__}: {err}"}
        sock.send(json.dumps(answer).encode())


PR_SET_CHILD_SUBREAPER = 36


def fork_shim(request: dict, lifeline: int, sock, prctl) -> int:
    """Fork a shim for one job, set up as subprocess.Popen would (new session, cwd, output
    to the log, no stdin, only the lifeline kept open); its pid. The shim is its job's
    subreaper, so it tells that nothing of the job is left without scanning /proc.

    Like Popen, it returns once the shim leads its own session: until then a signal to the
    job's group (a stop sent the moment it started) would find no group and be lost."""
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    led_r, led_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(log)
        os.close(led_w)
        os.read(led_r, 1)  # end of file: the shim leads its session (or has died)
        os.close(led_r)
        return pid
    code = 127
    try:
        os.close(led_r)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the shim waits for its job
        sock.close()
        os.setsid()
        os.close(led_w)
        os.chdir(request["cwd"])
        os.dup2(log, 1)
        os.dup2(log, 2)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.closerange(3, lifeline)
        os.closerange(lifeline + 1, MAX_FD)
        os.environ.clear()  # the job's environment, which execv hands on
        os.environ.update(request["env"])
        reaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        code = main(request["args"], reaper)
    except BaseException:
        os.write(2, b"quotaportal shim: could not start the job\n")
    try:
        with open(request["code"], "w") as code_file:
            code_file.write(str(code))
    finally:
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        os._exit(serve(int(sys.argv[2]), int(sys.argv[3])))
    os._exit(main(sys.argv[1:]))  # nothing to flush or tear down: skip the finalization
