"""Where the agent keeps each rank's processes: a cgroup of its own, like Slurm's
proctrack/cgroup.

A process can leave its process group and session (`setsid`, a double fork) but never its
cgroup, so a rank whose processes all live in one cgroup is over exactly when that cgroup is
empty, and stopping the cgroup stops all of it. The agent makes one folder per agent
(`quotaportal-NAME-HASH`, the hash of its work dir, so several agents share a machine) under
its own cgroup, and one folder per rank below it; the rank's first process joins it before
it runs the job's command (shim.start_job).

Preferred: cgroup v2 (`cgroup.kill`, `cgroup.events`), wherever it is mounted (the unified
hierarchy, or its `unified` folder on hybrid hosts). Else cgroup v1's freezer, which stops a
cgroup mid-fork while it is killed. Where neither can be written (an agent that is not root
and has no delegated cgroup), the shim is its job's subreaper and waits for, and stops, every
descendant it can find: good against `setsid`, not against a process that escapes on purpose
before the shim has looked. The agent logs at start which one it has.

Optional limits, like Slurm's DefMemPerGPU and DefCpuPerGPU: a rank given N GPUs may use
N × `--mem-per-gpu` of memory and N × `--cpus-per-gpu` CPUs, set on its own cgroup (v2's
memory.max and cpu.max where the agent's folder has those controllers, else a folder of the
rank's in cgroup v1's `memory` and `cpu` hierarchies). An agent asked for a limit it cannot
set refuses to start rather than run jobs unlimited.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

from quotaportal.hosts.agent.shim import cgroup_kill, cgroup_populated

log = logging.getLogger("quotaportal-agent")

MOUNTS = Path("/proc/self/mounts")
OWN_CGROUPS = Path("/proc/self/cgroup")
LEFTOVER_WAIT = 5.0


CPU_PERIOD_US = 100_000
SIZE_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class ContainmentError(Exception):
    """A limit was asked for that this host cannot enforce."""


@dataclass(frozen=True)
class Limits:
    """What one GPU of a rank brings with it: bytes of memory and CPUs (None: no limit)."""

    memory_per_gpu: int | None = None
    cpus_per_gpu: float | None = None

    def controllers(self) -> list[str]:
        wanted = [("memory", self.memory_per_gpu), ("cpu", self.cpus_per_gpu)]
        return [controller for controller, value in wanted if value is not None]

    def describe(self) -> str:
        parts = []
        if self.memory_per_gpu is not None:
            parts.append(f"{self.memory_per_gpu / (1 << 30):g} GiB of memory")
        if self.cpus_per_gpu is not None:
            parts.append(f"{self.cpus_per_gpu:g} CPUs")
        return " and ".join(parts) + " per GPU" if parts else "no memory or CPU limits"


def parse_size(text: str) -> int:
    """Bytes in '512M', '16G', '1.5T' or a plain number of bytes (binary units, as Slurm's)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if match is None or float(match[1]) <= 0:
        raise ValueError(f"{text!r} is not a size: write e.g. 16G, 512M or 1.5T")
    return int(float(match[1]) * SIZE_SUFFIXES[match[2].upper()])


@dataclass(frozen=True)
class Containment:
    """How this agent contains its ranks: `base` is its cgroup folder, None for none.

    `limited` maps each limited controller to the folder its rank folders go in: `base`
    itself where the tracking cgroup (v2) has the controller, a v1 hierarchy's folder else.
    """

    kind: str  # "cgroup v2", "cgroup v1 freezer" or "none"
    base: Path | None = None
    limits: Limits = Limits()
    limited: tuple[tuple[str, Path], ...] = ()

    def describe(self) -> str:
        if self.base is None:
            return (
                "no cgroups can be made here (run the agent as root, or delegate a cgroup to "
                "it): each job's shim waits for and stops the processes it can find"
            )
        return (
            f"{self.kind}: each rank runs in a cgroup of its own under {self.base}, "
            f"with {self.limits.describe()}"
        )

    def create(self, rank: str, gpus: int = 1) -> list[str]:
        """Fresh cgroups for one rank with `gpus` GPUs, the tracking one first (an empty
        list without cgroups)."""
        if self.base is None:
            return []
        folders = [self.base / rank]
        folders += [parent / rank for _, parent in self.limited if parent != self.base]
        made: list[str] = []
        try:
            for folder in folders:
                if folder.exists():
                    remove(folder)  # left by an earlier attempt of the same rank name
                folder.mkdir()
                made.append(str(folder))
            for controller, parent in self.limited:
                _set_limit(parent / rank, controller, self.limits, gpus)
        except OSError:
            release(made)
            raise
        return made

    def stop_leftovers(self) -> int:
        """Kill and remove every rank cgroup an earlier agent of this work dir left; how many
        still held processes."""
        if self.base is None or not self.base.is_dir():
            return 0
        stopped = 0
        for folder in sorted(p for p in self.base.iterdir() if p.is_dir()):
            if cgroup_populated(str(folder)):
                stopped += 1
                log.warning("stopping the processes an earlier agent left in %s", folder)
            remove(folder)
        for _, parent in self.limited:
            if parent != self.base and parent.is_dir():
                for folder in (p for p in parent.iterdir() if p.is_dir()):
                    remove(folder)
        return stopped


def _set_limit(folder: Path, controller: str, limits: Limits, gpus: int) -> None:
    """Write one controller's limit for a rank of `gpus` GPUs, in v2's or v1's files."""
    gpus = max(gpus, 1)  # a rank without GPUs still gets one GPU's share
    v2 = (folder / "cgroup.controllers").exists()
    if controller == "memory":
        size = str(limits.memory_per_gpu * gpus)
        if v2:
            _write(folder / "memory.max", size)
            _write_if_there(folder / "memory.swap.max", "0")
        else:
            _write(folder / "memory.limit_in_bytes", size)
            _write_if_there(folder / "memory.memsw.limit_in_bytes", size)  # no swap beyond it
    else:
        quota = round(limits.cpus_per_gpu * gpus * CPU_PERIOD_US)
        if v2:
            _write(folder / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        else:
            _write(folder / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(folder / "cpu.cfs_quota_us", str(quota))


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        with contextlib.suppress(OSError):  # e.g. swap accounting switched off
            path.write_text(value)


def remove(folder: Path) -> None:
    """Kill what is left in a rank's cgroup and remove it."""
    deadline = time.monotonic() + LEFTOVER_WAIT
    while cgroup_populated(str(folder)) and time.monotonic() < deadline:
        cgroup_kill(str(folder))
        time.sleep(0.02)
    with contextlib.suppress(FileNotFoundError):
        try:
            folder.rmdir()
        except OSError as err:
            log.warning("could not remove the cgroup %s: %s", folder, err)


def release(cgroups: list[str]) -> None:
    for folder in cgroups:
        remove(Path(folder))


def detect(name: str, work_dir: Path, limits: Limits = Limits()) -> Containment:
    """The best containment this agent can make, with its folders created; ContainmentError
    when a limit is asked for that no writable cgroup can enforce."""
    folder = f"quotaportal-{_slug(name)}-{hashlib.sha256(bytes(work_dir)).hexdigest()[:8]}"
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    found = Containment("none")
    for kind, key in (("cgroup v2", "cgroup2"), ("cgroup v1 freezer", "freezer")):
        base = _own_folder(mounts.get(key), own.get("" if key == "cgroup2" else key), folder)
        if base is not None:
            found = Containment(kind, base)
            break
    if not limits.controllers():
        return found
    if found.base is None:
        raise ContainmentError(
            f"{limits.describe()} need cgroups, and none can be made here: run the agent as "
            "root or delegate a cgroup to it, or leave out --mem-per-gpu and --cpus-per-gpu"
        )
    limited = tuple(
        (controller, _limit_folder(found, controller, mounts, own, folder))
        for controller in limits.controllers()
    )
    return Containment(found.kind, found.base, limits, limited)


def _own_folder(mount: Path | None, own: str | None, folder: str) -> Path | None:
    """The agent's folder below its own cgroup in one hierarchy, made and proven writable."""
    if mount is None or own is None:
        return None
    base = mount / own.lstrip("/") / folder
    try:
        base.mkdir(exist_ok=True)
        probe = base / "probe"
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError:
        return None
    return base


def _limit_folder(
    found: Containment, controller: str, mounts: dict[str, Path], own: dict[str, str], folder: str
) -> Path:
    """Where a controller's per-rank folders go: the v2 folder itself when it can hand the
    controller to its children, else the agent's folder in the controller's v1 hierarchy."""
    if found.kind == "cgroup v2" and _enable_v2_controller(found.base, controller):
        return found.base
    base = _own_folder(mounts.get(controller), own.get(controller), folder)
    if base is None:
        raise ContainmentError(
            f"cannot limit {controller} here: the cgroup {found.base} cannot hand the "
            f"{controller} controller to its children and no cgroup v1 {controller} "
            "hierarchy is writable"
        )
    return base


def _enable_v2_controller(base: Path, controller: str) -> bool:
    if controller not in _read(base / "cgroup.controllers").split():
        return False
    try:
        (base / "cgroup.subtree_control").write_text(f"+{controller}")
    except OSError:
        return False
    return True


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40] or "agent"


def _cgroup_mounts() -> dict[str, Path]:
    """{"cgroup2": mount point, "freezer" / "memory" / "cpu": that v1 hierarchy's mount
    point}, as far as mounted."""
    found: dict[str, Path] = {}
    for line in _lines(MOUNTS):
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            found.setdefault("cgroup2", point)
        elif fstype == "cgroup":
            for controller in {"freezer", "memory", "cpu"}.intersection(options):
                found.setdefault(controller, point)
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per hierarchy: "" for v2, the controller's name for v1's."""
    own: dict[str, str] = {}
    for line in _lines(OWN_CGROUPS):
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _lines(path: Path) -> list[str]:
    return _read(path).splitlines()  # none: not Linux, or no /proc, so no cgroups
