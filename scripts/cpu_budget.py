"""Where a benchmark's CPU went: the machine's, and each part of the stack's, per job.

On a small host every part of the stack (gunicorn, PostgreSQL, the Celery workers, the agent
and the jobs it starts) shares the same cores, so the CPU one job costs them all together
bounds the throughput however the work is arranged: at most cores / (CPU per job). Read
from /proc: each process's user and system time, and the machine's busy time (which also
counts what is too short-lived to be seen, each job's shim and command, and the kernel).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_ticks() -> int:
    """All CPUs' busy time since boot (every field of /proc/stat's first line but idle and
    iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields) - fields[3] - fields[4]


def processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, CPU ticks used, command line) of every process still readable."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue  # it ended meanwhile
        fields = stat[stat.rfind(")") + 2 :].split()
        found[int(entry)] = (int(fields[1]), int(fields[11]) + int(fields[12]), command.decode())
    return found


class CpuMeter:
    """CPU used between start() and stop() by named process trees (each root's descendants
    count as it) and by the PostgreSQL backends of one database, beside the machine's."""

    def __init__(self, roots: dict[str, list[int]], database: str):
        self.roots, self.database = roots, database
        self.before: tuple[int, Counter] | None = None
        self.after: tuple[int, Counter] | None = None

    @classmethod
    def of_stack(cls, stack) -> CpuMeter:
        """The parts of a stack.Stack: its web server, its Celery workers and beat, its
        agents (with their shims' spawner) and its PostgreSQL database's backends."""
        parts: dict[str, list[int]] = {"web": [], "workers": [], "agents": []}
        for name, process in stack.processes.items():
            if name == "web":
                parts["web"].append(process.pid)
            elif name.startswith(("worker", "beat")):
                parts["workers"].append(process.pid)
            else:
                parts["agents"].append(process.pid)
        return cls(parts, stack.database)

    def start(self) -> None:
        self.before = self._read()

    def stop(self) -> None:
        self.after = self._read()

    def per_job_ms(self, jobs: int) -> dict[str, float]:
        """CPU milliseconds per job: `machine` in all, each part, and `other` (the jobs, their
        shims, the benchmark's clients, the kernel: the machine's less the parts')."""
        (busy_before, parts_before), (busy_after, parts_after) = self.before, self.after
        ms = {part: (parts_after[part] - parts_before[part]) for part in parts_after}
        ms = {part: ticks * 1000 / TICKS / jobs for part, ticks in ms.items()}
        machine = (busy_after - busy_before) * 1000 / TICKS / jobs
        return {
            "machine": round(machine, 1),
            **{part: round(value, 1) for part, value in sorted(ms.items())},
            "other": round(machine - sum(ms.values()), 1),
        }

    def _read(self) -> tuple[int, Counter]:
        table = processes()
        part_of = {pid: part for part, pids in self.roots.items() for pid in pids}
        used: Counter = Counter(dict.fromkeys([*self.roots, "database"], 0))
        for pid, (_, ticks, command) in table.items():
            part = _part(pid, table, part_of)
            if part is None and command.startswith("postgres:") and f" {self.database} " in command:
                part = "database"
            if part is not None:
                used[part] += ticks
        return machine_busy_ticks(), used


def _part(pid: int, table: dict, part_of: dict[int, str]) -> str | None:
    """The part whose root this process descends from, if any."""
    seen = set()
    while pid in table and pid not in seen:
        if pid in part_of:
            return part_of[pid]
        seen.add(pid)
        pid = table[pid][0]
    return None


def bound_jobs_per_s(machine_ms_per_job: float) -> float:
    """The most jobs a second this machine's cores could carry at this CPU per job."""
    return round((os.cpu_count() or 1) * 1000 / machine_ms_per_job, 1)
