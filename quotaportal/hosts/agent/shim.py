"""The supervisor between the agent and one rank of a job (like containerd's shim).

    python -I -S shim.py GRACE_SECONDS LIFELINE_FD SCRIPT CGROUPS [UID GID]
    python -I -S shim.py --serve LIFELINE_FD SOCKET_FD      (the spawner, see serve())

It leads the job's process group and runs `/bin/sh SCRIPT` in it. It holds the read end of a
pipe whose write end only the agent holds: when the agent dies, even by `kill -9`, the pipe
reads end-of-file and the shim stops the whole job (SIGTERM, then SIGKILL after the grace
period), so no job outlives its agent and later runs twice beside its own retry.

CGROUPS is the rank's cgroup directories joined by ':' ('-' for none; the first one tracks
the job, see containment.py). The job's first process joins them before it runs the script,
so every descendant is in them whatever it does with sessions and process groups (`setsid`,
a double fork): the job is over when its cgroup is empty, and a stop reaches all of it.
Without cgroups the shim is its job's subreaper: whatever leaves the group becomes the shim's
child, so it waits for, and stops, every descendant.

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


def live_processes():
    """(pid, parent pid, process group) of every live (non-zombie) process, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue  # it ended meanwhile
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z":
            yield int(entry), int(fields[1]), int(fields[2])


def others_alive(pgid: int, me: int) -> bool:
    """Does a live process other than the shim remain in the group?"""
    return any(group == pgid and pid != me for pid, _, group in live_processes())


def job_left(pgid: int, reaper: bool, cgroup: str = "") -> bool:
    """Is a live process of the job left once its first process has exited?"""
    if cgroup:
        no_descendants()  # reap the exited ones
        return cgroup_populated(cgroup)
    if reaper:
        # Whatever left the group (setsid, a double fork) became the shim's child.
        return not no_descendants()
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


def stop_job(pgid: int, grace: float, cgroup: str, reaper: bool) -> None:
    """SIGTERM to all of the job, SIGKILL to what is left after the grace period."""
    signal_job(pgid, signal.SIGTERM, cgroup, os.getpid())
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and job_left(pgid, reaper, cgroup):
        time.sleep(POLL_SECONDS)
    signal_job(pgid, signal.SIGKILL, cgroup, os.getpid())
    os.killpg(pgid, signal.SIGKILL)  # ends the shim too


def signal_job(pgid: int, sig: int, cgroup: str, shim: int) -> None:
    """Signal every process of a job: its cgroup, else the shim's descendants; and its group.
    The shim itself (the group's leader) only takes SIGTERM, with a handler."""
    if cgroup:
        if sig == signal.SIGKILL:
            cgroup_kill(cgroup)
        else:
            cgroup_signal(cgroup, sig)
    else:
        for pid in descendants(shim):
            _signal_pid(pid, sig)
    if sig != signal.SIGKILL:
        _signal_pid(-pgid, sig)


def _signal_pid(pid: int, sig: int) -> None:
    """os.kill, for a process (or a group, as -pgid) that may be gone already."""
    try:  # noqa: SIM105 - contextlib would add to every job's start-up
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def descendants(root: int) -> list[int]:
    """Every live process below `root`, read from /proc (the containment of last resort)."""
    children: dict[int, list[int]] = {}
    for pid, parent, _ in live_processes():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


# -- cgroups: a rank's processes, whatever they do with sessions --------------------------


def cgroup_join(dirs: list[str]) -> None:
    """Move the calling process into every directory's cgroup ('0' is the writer itself)."""
    for folder in dirs:
        with open(f"{folder}/cgroup.procs", "w") as procs:
            procs.write("0")


def cgroup_pids(folder: str) -> list[int]:
    try:
        with open(f"{folder}/cgroup.procs") as procs:
            return [int(line) for line in procs.read().split()]
    except OSError:
        return []


def cgroup_populated(folder: str) -> bool:
    """Is a live process left in the cgroup (or one below it)?"""
    try:
        with open(f"{folder}/cgroup.events") as events:  # cgroup v2
            return "populated 1" in events.read()
    except FileNotFoundError:
        return bool(cgroup_pids(folder))  # v1: exited processes leave cgroup.procs at once
    except OSError:
        return False


def cgroup_signal(folder: str, sig: int) -> None:
    for pid in cgroup_pids(folder):
        _signal_pid(pid, sig)


def cgroup_kill(folder: str) -> None:
    """SIGKILL everything in the cgroup, including what forks meanwhile: cgroup.kill (v2,
    Linux 5.14+) does it in the kernel; else the cgroup is frozen, killed and thawed."""
    try:
        with open(f"{folder}/cgroup.kill", "w") as kill:
            kill.write("1")
        return
    except OSError:
        pass
    frozen = _cgroup_freeze(folder, True)
    for _ in range(100):  # without a freezer a fork may slip between reading and killing
        pids = cgroup_pids(folder)
        if not pids:
            break
        for pid in pids:
            _signal_pid(pid, signal.SIGKILL)
        if frozen:
            break
        time.sleep(0.01)
    if frozen:
        _cgroup_freeze(folder, False)


def _cgroup_freeze(folder: str, frozen: bool) -> bool:
    for name, value in (
        ("cgroup.freeze", "1" if frozen else "0"),  # v2
        ("freezer.state", "FROZEN" if frozen else "THAWED"),  # v1 freezer
    ):
        try:
            with open(f"{folder}/{name}", "w") as control:
                control.write(value)
            return True
        except OSError:
            continue
    return False


def main(argv: list[str], reaper: bool = False) -> int:
    grace, lifeline, script = float(argv[0]), int(argv[1]), argv[2]
    cgroups = [] if argv[3] == "-" else argv[3].split(":")
    as_user = (int(argv[4]), int(argv[5])) if len(argv) == 6 else None
    # The agent stops a job with killpg(SIGTERM): the shim must outlive it to report the code.
    # A handler (not SIG_IGN) so the job itself still gets the default action after exec.
    signal.signal(signal.SIGTERM, lambda *_: None)
    if not reaper and not cgroups:
        reaper = become_subreaper()
    pgid = os.getpgid(0)
    tracked = cgroups[0] if cgroups else ""
    child = start_job(script, as_user, cgroups)
    exited = child_exit_fd(child)
    code = None
    while True:
        if code is None:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                code = exit_code(status)
        if code is not None and not job_left(pgid, reaper, tracked):
            return code
        # Wake the moment the job exits (its pidfd turns readable), not at the next poll; once
        # it has, look often for the rest of it to be gone.
        watched = [exited] if code is None and exited is not None else []
        if lifeline_cut(lifeline, POLL_SECONDS if code is None else LINGER_SECONDS, watched):
            stop_job(pgid, grace, tracked, reaper)


def become_subreaper() -> bool:
    """A shim started alone (no spawner) makes itself its job's subreaper, as a forked one is."""
    import ctypes  # only on this path: the spawner's shims are subreapers already

    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def start_job(script: str, as_user: tuple[int, int] | None, cgroups: list[str]) -> int:
    """Fork and exec `/bin/sh SCRIPT` in the shim's group and the rank's cgroups; the child's
    pid. A job that cannot join its cgroups does not run: it could not be stopped whole.

    The job keeps only stdin, stdout and stderr: it must never hold the lifeline, or the
    agent's death would not reach the shim while the job lives.
    """
    pid = os.fork()
    if pid:
        return pid
    try:
        os.closerange(3, MAX_FD)
        cgroup_join(cgroups)
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
    """Fork a shim for one job, set up as subprocess.Popen would (a process group of its
    own, cwd, output to the log, no stdin, only the lifeline kept open); its pid. The shim is
    its job's subreaper, so it tells that nothing of the job is left without scanning /proc.

    The shim's group exists when this returns, so a stop sent the moment the job started
    finds it: both sides make the shim its group's leader (the shell's job-control idiom), so
    this side need not wait for the shim to be scheduled (on a busy host, about a millisecond
    per start). No new session: the spawner's own has no terminal to hang up or be taken."""
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    pid = os.fork()
    if pid:
        os.close(log)
        try:  # noqa: SIM105 - gone already (killed at once, and reaped): nothing to lead
            os.setpgid(pid, pid)
        except ProcessLookupError:
            pass
        return pid
    code = 127
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the shim waits for its job
        sock.close()
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
