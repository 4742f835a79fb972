"""Slurm through its command-line tools, on this machine or on a login node over ssh.

The CLI, not slurmrestd (which needs JWT set up in slurm.conf and cannot requeue) nor PySlurm
(tied to one exact Slurm version). Two commands read the whole state the portal needs, one
statement each: `scontrol show job -d -o` (every job slurmctld holds, with the GPUs each has
on each node, its exit code and times) and `sinfo -N` (every node, its state, GPUs and
features). A command that cannot reach slurmctld, fails on ssh or runs past its time is
Unavailable, never an empty cluster; a command Slurm answers with an error is Refused.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

from quotaportal.slurm.hostlists import expand

# What Slurm prints when slurmctld (or the network to it) is away, rather than refusing.
UNREACHABLE = (
    "unable to contact slurm controller",
    "socket timed out",
    "connection refused",
    "zero bytes were transmitted",
    "communication connection failure",
    "slurm_receive_msg",
    "temporarily unavailable",
)
# scancel of a job that ended meanwhile: nothing left to stop, which is what was wanted.
ALREADY_OVER = ("already completing or completed", "invalid job id")
SSH_FAILED = 255  # ssh's own exit status: the login node did not answer


class SlurmError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Unavailable(SlurmError):
    """Slurm could not be asked: slurmctld down, ssh failed, a command timed out."""


class Refused(SlurmError):
    """Slurm answered, with an error (an unknown partition, a user it does not know)."""


@dataclass(frozen=True)
class Access:
    """How the portal reaches Slurm: this machine's commands, or ssh to a login node."""

    ssh_host: str = ""  # empty: the commands run here
    ssh_user: str = ""
    ssh_key: str = ""  # a private key's path on the portal's machine
    slurm_conf: str = ""  # SLURM_CONF for the commands (a test cluster's); empty: the default
    timeout: float = 10.0

    def argv(self, command: list[str]) -> list[str]:
        """The command as it is run: as is here, or one ssh call with it quoted."""
        if not self.ssh_host:
            return command
        remote = shlex.join(command)
        if self.slurm_conf:
            remote = f"SLURM_CONF={shlex.quote(self.slurm_conf)} {remote}"
        target = f"{self.ssh_user}@{self.ssh_host}" if self.ssh_user else self.ssh_host
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(self.timeout))}"]
        if self.ssh_key:
            ssh += ["-i", self.ssh_key]
        return [*ssh, target, "--", remote]

    def environment(self) -> dict[str, str]:
        if self.slurm_conf and not self.ssh_host:
            return {**os.environ, "SLURM_CONF": self.slurm_conf}
        return dict(os.environ)


def run(access: Access, command: list[str], stdin: str | None = None) -> str:
    """Run one Slurm command; its standard output, or Unavailable / Refused."""
    try:
        done = subprocess.run(
            access.argv(command),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=access.timeout,
            env=access.environment(),
        )
    except FileNotFoundError as err:
        raise Unavailable(f"{err.filename} is not installed where the portal runs it") from None
    except subprocess.TimeoutExpired:
        raise Unavailable(f"{command[0]} did not answer within {access.timeout:g} s") from None
    if done.returncode == 0:
        return done.stdout
    message = (done.stderr or done.stdout).strip().splitlines()
    text = " ".join(message)[-500:] or f"{command[0]} exited with status {done.returncode}"
    if (access.ssh_host and done.returncode == SSH_FAILED) or any(
        sign in text.lower() for sign in UNREACHABLE
    ):
        raise Unavailable(text)
    raise Refused(text)


# -- nodes -----------------------------------------------------------------------------------

NODE_FORMAT = "%N|%T|%G|%f|%P|%E"
# Node states that take new jobs; "+" flags (e.g. "mixed+planned") may follow, "*" means the
# node does not answer, and "drain"/"down"/"fail"/"maint" anywhere means it takes none.
USABLE = ("idle", "mixed", "allocated", "completing")


@dataclass(frozen=True)
class Node:
    name: str
    state: str
    partitions: frozenset[str]
    gpus: dict[str, int]  # GPU type ("" when untyped) -> how many the node has
    features: frozenset[str]
    reason: str = ""

    @property
    def usable(self) -> bool:
        state = self.state.lower()
        return not state.endswith("*") and state.split("+")[0] in USABLE


def parse_gres(text: str) -> dict[str, int]:
    """GPUs in a GRES string: "gpu:a100:4(S:0),gpu:2" -> {"a100": 4, "": 2}."""
    gpus: dict[str, int] = {}
    for item in re.sub(r"\([^)]*\)", "", text or "").split(","):
        parts = item.strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        kind, count = (parts[1], parts[2]) if len(parts) >= 3 else ("", parts[1])
        if count.isdigit():
            gpus[kind] = gpus.get(kind, 0) + int(count)
    return gpus


def parse_nodes(text: str) -> list[Node]:
    """`sinfo -N -h -o NODE_FORMAT`: one line per node and partition, merged per node."""
    found: dict[str, Node] = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 6:
            continue
        name, state, gres, features, partition, reason = fields[:6]
        partitions = {partition.rstrip("*")}
        if name in found:
            partitions |= found[name].partitions
        found[name] = Node(
            name,
            state,
            frozenset(partitions),
            parse_gres(gres),
            frozenset(f for f in features.split(",") if f and f != "(null)"),
            "" if reason == "none" else reason,
        )
    return list(found.values())


# -- jobs ------------------------------------------------------------------------------------

# Ended for good: a job in one of these will not run again (the portal never requeues in Slurm).
ENDED = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "SPECIAL_EXIT",
}
_KEY_NAME = re.compile(r"[A-Za-z_][\w/:]*\Z")


@dataclass(frozen=True)
class Job:
    job_id: str
    name: str
    state: str
    reason: str = ""
    user: str = ""
    comment: str = ""
    partition: str = ""
    node_list: str = ""
    exit_code: int | None = None
    signal: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    stdout: str = ""
    gpus_on: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> type -> n

    @property
    def ended(self) -> bool:
        return self.state in ENDED


def _pairs(line: str) -> list[tuple[str, str]]:
    """`Key=Value Key=Value ...` in order (a key may come again: each node group's Nodes=
    and GRES=). A word without "=" belongs to the value before it (a value with spaces)."""
    pairs: list[tuple[str, str]] = []
    for word in line.split():
        key, equals, value = word.partition("=")
        if equals and _KEY_NAME.match(key):
            pairs.append((key, value))
        elif pairs:
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]} {word}")
    return pairs


def _time(text: str) -> datetime | None:
    """scontrol's times are slurmctld's local time, without a zone."""
    if not text or text in ("Unknown", "None", "N/A"):
        return None
    try:
        return datetime.fromisoformat(text).astimezone()
    except ValueError:
        return None


def _job(line: str) -> Job | None:
    pairs = _pairs(line)
    values = dict(pairs)
    if "JobId" not in values:
        return None
    code, _, signal = values.get("ExitCode", "").partition(":")
    gpus_on: dict[str, dict[str, int]] = {}
    nodes = None
    for key, value in pairs:  # the detail lines: "Nodes=n[1-2] CPU_IDs=0 Mem=0 GRES=gpu:a:2"
        if key == "Nodes":
            nodes = expand(value)
        elif key == "GRES" and nodes:
            for node in nodes:
                for kind, count in parse_gres(value).items():
                    on_node = gpus_on.setdefault(node, {})
                    on_node[kind] = on_node.get(kind, 0) + count
            nodes = None
    return Job(
        job_id=values["JobId"],
        name=values.get("JobName", ""),
        state=values.get("JobState", "").split()[0],
        reason=values.get("Reason", "None"),
        user=values.get("UserId", "").split("(")[0],
        comment="" if values.get("Comment") == "(null)" else values.get("Comment", ""),
        partition=values.get("Partition", ""),
        node_list="" if values.get("NodeList") == "(null)" else values.get("NodeList", ""),
        exit_code=int(code) if code.isdigit() else None,
        signal=int(signal) if signal.isdigit() else None,
        start=_time(values.get("StartTime", "")),
        end=_time(values.get("EndTime", "")),
        stdout=values.get("StdOut", ""),
        gpus_on=gpus_on,
    )


def parse_jobs(text: str) -> dict[str, Job]:
    """`scontrol show job -d -o`: one line per job ("No jobs in the system" when none)."""
    jobs = {}
    for line in text.splitlines():
        if line.strip() and (job := _job(line)) is not None:
            jobs[job.job_id] = job
    return jobs


# -- the calls -------------------------------------------------------------------------------


@dataclass
class Poll:
    """What Slurm holds now: every job slurmctld knows, and every node."""

    jobs: dict[str, Job]
    nodes: list[Node]


def poll(access: Access) -> Poll:
    """Both commands at once: each is mostly a process starting and a round trip to
    slurmctld, so together they take the time of the slower one."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        asked_jobs = pool.submit(run, access, ["scontrol", "show", "job", "-d", "-o"])
        asked_nodes = pool.submit(run, access, ["sinfo", "-N", "-h", "-o", NODE_FORMAT])
        jobs, nodes = parse_jobs(asked_jobs.result()), parse_nodes(asked_nodes.result())
    if not nodes:
        # slurmctld always knows its nodes: an empty answer is a failure, not a cluster.
        raise Unavailable("sinfo listed no nodes")
    return Poll(jobs, nodes)


# What a job's environment holds (sbatch passes its own on): nothing of the portal's (its
# database URL, its keys). Not sbatch's --export=NONE, which has slurmd build the user's
# login environment for every job (a login shell each: seconds of CPU on a busy node).
JOB_ENVIRONMENT = ("PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8")


def submit(access: Access, options: list[str], script: str) -> str:
    """sbatch with the script on its standard input, in a clean environment; Slurm's job id."""
    clean = ["env", "-i", *JOB_ENVIRONMENT]
    if access.slurm_conf:
        clean.append(f"SLURM_CONF={access.slurm_conf}")
    answer = run(access, [*clean, "sbatch", "--parsable", *options], stdin=script).strip()
    job_id = answer.split(";")[0]
    if not job_id.isdigit():
        raise Refused(f"sbatch answered {answer[:200]!r}, not a job id")
    return job_id


def signal(access: Access, job_id: str, name: str) -> None:
    """The checkpoint signal to the job's steps: its ranks (the batch script runs them as one
    srun step). Not to the batch shell too (--full): srun takes a SIGTERM of its own as an
    order to kill the step, and the ranks would never see theirs."""
    _over_is_fine(access, ["scancel", f"--signal={name}", job_id])


def cancel(access: Access, job_ids: list[str]) -> None:
    """Stop the jobs: Slurm's TERM, its KillWait, then KILL."""
    if job_ids:
        _over_is_fine(access, ["scancel", *job_ids])


def _over_is_fine(access: Access, command: list[str]) -> None:
    try:
        run(access, command)
    except Refused as err:
        if not any(sign in err.message.lower() for sign in ALREADY_OVER):
            raise
