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


@dataclass(frozen=True)
class Containment:
    """How this agent contains its ranks: `base` is its cgroup folder, None for none."""

    kind: str  # "cgroup v2", "cgroup v1 freezer" or "none"
    base: Path | None = None

    def describe(self) -> str:
        if self.base is None:
            return (
                "no cgroups can be made here (run the agent as root, or delegate a cgroup to "
                "it): each job's shim waits for and stops the processes it can find"
            )
        return f"{self.kind}: each rank runs in a cgroup of its own under {self.base}"

    def create(self, rank: str) -> list[str]:
        """A fresh cgroup for one rank (an empty list without cgroups)."""
        if self.base is None:
            return []
        folder = self.base / rank
        if folder.exists():
            remove(folder)  # left by an earlier attempt of the same rank name
        folder.mkdir()
        return [str(folder)]

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
        return stopped


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


def detect(name: str, work_dir: Path) -> Containment:
    """The best containment this agent can make, with its folder created."""
    folder = f"quotaportal-{_slug(name)}-{hashlib.sha256(bytes(work_dir)).hexdigest()[:8]}"
    mounts = _cgroup_mounts()
    own = _own_cgroups()
    for kind, mount, key in (
        ("cgroup v2", mounts.get("cgroup2"), ""),
        ("cgroup v1 freezer", mounts.get("freezer"), "freezer"),
    ):
        if mount is None or key not in own:
            continue
        base = mount / own[key].lstrip("/") / folder
        try:
            base.mkdir(exist_ok=True)
            probe = base / "probe"
            probe.mkdir(exist_ok=True)
            probe.rmdir()
        except OSError:
            continue
        return Containment(kind, base)
    return Containment("none")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:40] or "agent"


def _cgroup_mounts() -> dict[str, Path]:
    """{"cgroup2": mount point, "freezer": v1 freezer mount point}, as far as mounted."""
    found: dict[str, Path] = {}
    for line in _lines(MOUNTS):
        fields = line.split()
        if len(fields) < 4:
            continue
        point, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup2":
            found.setdefault("cgroup2", point)
        elif fstype == "cgroup" and "freezer" in options:
            found.setdefault("freezer", point)
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per hierarchy: "" for v2, "freezer" for v1's freezer."""
    own: dict[str, str] = {}
    for line in _lines(OWN_CGROUPS):
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []  # not Linux, or no /proc: no cgroups
