"""What the simulator replays: job queues (capacity, shares, ordering) and their jobs over time.

A workload file is JSON (`python -m scheduler.simulate --workload FILE`):

    {"name": "sweep", "queues": [{
        "name": "q1", "capacity": {"gpu": 8}, "ordering": "STRICT", "grace_s": 0,
        "capacity_changes": [{"at_s": 3600, "capacity": {"gpu": 4}}],
        "shares": [{"name": "vision", "limits": {"gpu": 4}, "strategy": "LEND_AND_BORROW",
                    "borrow_limit": 100, "in_share_preemption": true}],
        "jobs": [{"id": "j1", "share": "vision", "unit": "gpu", "quantity": 1,
                  "priority": 10, "submit_s": 0, "duration_s": 120,
                  "priority_changes": [[60, 50]]}]}]}

A file holding one queue may leave out the "queues" list and put that queue's fields at the top.
Shares are written as in scenario files. A configuration file (`--config`) is the same without
jobs; it replaces the configuration of the queue with the same name, or of every queue when it
names none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scheduler.fairshare import Policy
from scheduler.model import Ordering, Share
from scheduler.scenarios.format import ScenarioError, parse_share, unit_counts
from scheduler.scenarios.world import share_from_spec
from scheduler.validation import MAX_PRIORITY, MIN_PRIORITY


class WorkloadError(ValueError):
    """A workload or configuration that cannot be replayed; the message says where and why."""


@dataclass(frozen=True, slots=True)
class WorkJob:
    id: str
    share: str
    unit: str
    quantity: int
    priority: int
    submit_s: float
    duration_s: float
    priority_changes: tuple[tuple[float, int], ...] = ()


@dataclass(frozen=True)
class QueueConfig:
    name: str
    capacity: Mapping[str, int]
    shares: tuple[Share, ...]
    ordering: Ordering = Ordering.STRICT
    # (at_s, capacity) pairs in time order: from at_s on, the units named have that capacity.
    capacity_changes: tuple[tuple[float, Mapping[str, int]], ...] = ()
    # A preemptor's process starts only once its victims have had this long to exit
    # (docs/concepts.md, Job lifecycle).
    grace_s: float = 0.0
    # Borrowers ordered by decayed past use (scheduler.fairshare); None: the oldest job first.
    fair_share: Policy | None = None

    def capacity_at(self, at_s: float) -> dict[str, int]:
        capacity = dict(self.capacity)
        for when, change in self.capacity_changes:
            if when <= at_s:
                capacity.update(change)
        return capacity


@dataclass(frozen=True)
class QueueWorkload:
    config: QueueConfig
    jobs: tuple[WorkJob, ...]


@dataclass(frozen=True)
class Workload:
    name: str
    queues: tuple[QueueWorkload, ...]
    # How the workload was made (a trace's QoS-to-share mapping, say), printed with the results.
    notes: tuple[str, ...] = field(default=())

    @property
    def job_count(self) -> int:
        return sum(len(q.jobs) for q in self.queues)


def capacity_bound_s(queue: QueueWorkload) -> float:
    """No schedule can finish sooner: the busiest unit's work divided by its capacity, and no
    job ends before its submit time plus its duration."""
    work: dict[str, float] = {}
    last_possible_end = 0.0
    first_submit = min((j.submit_s for j in queue.jobs), default=0.0)
    for job in queue.jobs:
        work[job.unit] = work.get(job.unit, 0.0) + job.quantity * job.duration_s
        last_possible_end = max(last_possible_end, job.submit_s + job.duration_s)
    bound = last_possible_end - first_submit
    peak = dict(queue.config.capacity)
    for _, change in queue.config.capacity_changes:
        for unit, count in change.items():
            peak[unit] = max(peak.get(unit, 0), count)
    for unit, total in work.items():
        if peak.get(unit, 0) > 0:
            bound = max(bound, total / peak[unit])
    return bound


def scaled(workload: Workload, factor: float) -> Workload:
    """The workload on a cluster `factor` times its size: every capacity and share limit
    scaled (at least 1 where it was not 0). What if the fleet were half as big?"""

    def scale(counts: Mapping[str, int]) -> dict[str, int]:
        return {u: max(1, math.floor(n * factor)) if n else 0 for u, n in counts.items()}

    queues = []
    for queue in workload.queues:
        config = queue.config
        shares = tuple(replace(s, limits=scale(s.limits)) for s in config.shares)
        changes = tuple((at, scale(change)) for at, change in config.capacity_changes)
        config = replace(
            config, capacity=scale(config.capacity), shares=shares, capacity_changes=changes
        )
        jobs = tuple(
            replace(j, quantity=min(j.quantity, max(1, config.capacity.get(j.unit, 1))))
            for j in queue.jobs
        )
        queues.append(QueueWorkload(config, jobs))
    note = f"capacity and share limits scaled to {factor:g}x (jobs capped at a unit's capacity)"
    return Workload(workload.name, tuple(queues), (*workload.notes, note))


# -- reading ---------------------------------------------------------------------------------


def load_workload(path: str | Path) -> Workload:
    data = _read_json(path)
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}: the file must hold one JSON object")
    queues = data.get("queues", [data])
    if not isinstance(queues, list) or not queues:
        raise WorkloadError(f"{path}: 'queues' must be a non-empty list")
    parsed = tuple(_queue(q, f"{path}: queues[{i}]", with_jobs=True) for i, q in enumerate(queues))
    names = [q.config.name for q in parsed]
    if len(set(names)) != len(names):
        raise WorkloadError(f"{path}: queue names must be unique")
    notes = data.get("notes", [])
    return Workload(str(data.get("name", Path(path).stem)), parsed, tuple(map(str, notes)))


def apply_config(workload: Workload, path: str | Path) -> Workload:
    """The workload with the configuration file's queue settings in place of its own."""
    data = _read_json(path)
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}: the file must hold one JSON object")
    configs = [
        _queue(q, f"{path}: queues[{i}]", with_jobs=False).config
        for i, q in enumerate(data.get("queues", [data]))
    ]
    by_name = {c.name: c for c in configs}
    queues = []
    for queue in workload.queues:
        config = by_name.get(queue.config.name)
        if config is None and len(configs) == 1 and "name" not in data:
            config = replace(configs[0], name=queue.config.name)
        if config is None:
            raise WorkloadError(f"{path}: no configuration for queue {queue.config.name!r}")
        queues.append(QueueWorkload(config, queue.jobs))
    checked = Workload(workload.name, tuple(queues), workload.notes)
    for queue in checked.queues:
        _check_jobs_fit(queue, str(path))
    return checked


def _read_json(path: str | Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except OSError as err:
        raise WorkloadError(f"{path}: cannot read: {err.strerror}") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise WorkloadError(f"{path}: not valid JSON: {err}") from err


def _queue(body: Any, where: str, *, with_jobs: bool) -> QueueWorkload:
    if not isinstance(body, dict):
        raise WorkloadError(f"{where}: must be an object")
    try:
        capacity = unit_counts(body.get("capacity"), f"{where}: capacity")
        if not isinstance(body.get("shares"), list) or not body["shares"]:
            raise WorkloadError(f"{where}: 'shares' must be a non-empty list")
        shares = tuple(
            share_from_spec(parse_share(s, f"{where}: shares[{i}]"))
            for i, s in enumerate(body["shares"])
        )
        changes = tuple(
            _capacity_change(c, f"{where}: capacity_changes[{i}]")
            for i, c in enumerate(body.get("capacity_changes", []))
        )
    except ScenarioError as err:
        raise WorkloadError(str(err)) from None
    if len({s.name for s in shares}) != len(shares):
        raise WorkloadError(f"{where}: share names must be unique")
    ordering = body.get("ordering", "STRICT")
    if ordering not in Ordering.__members__:
        raise WorkloadError(f"{where}: ordering must be STRICT or BEST_EFFORT, got {ordering!r}")
    grace = _seconds(body.get("grace_s", 0), f"{where}: grace_s")
    config = QueueConfig(
        str(body.get("name", "queue")),
        capacity,
        shares,
        Ordering(ordering),
        tuple(sorted(changes, key=lambda c: c[0])),
        grace,
    )
    jobs: tuple[WorkJob, ...] = ()
    if with_jobs:
        raw = body.get("jobs")
        if not isinstance(raw, list):
            raise WorkloadError(f"{where}: 'jobs' must be a list")
        jobs = tuple(_job(j, f"{where}: jobs[{i}]") for i, j in enumerate(raw))
        if len({j.id for j in jobs}) != len(jobs):
            raise WorkloadError(f"{where}: job ids must be unique")
    queue = QueueWorkload(config, jobs)
    _check_jobs_fit(queue, where)
    return queue


def _check_jobs_fit(queue: QueueWorkload, where: str) -> None:
    shares = {s.name for s in queue.config.shares}
    for job in queue.jobs:
        if job.share not in shares:
            raise WorkloadError(f"{where}: job {job.id} names unknown share {job.share!r}")


def _capacity_change(body: Any, where: str) -> tuple[float, dict[str, int]]:
    if not isinstance(body, dict) or set(body) != {"at_s", "capacity"}:
        raise WorkloadError(f'{where}: must be {{"at_s": seconds, "capacity": {{unit: n}}}}')
    return _seconds(body["at_s"], f"{where}.at_s"), unit_counts(body["capacity"], where)


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise WorkloadError(f"{where}: must be a number of seconds")
    if value < 0:
        raise WorkloadError(f"{where}: must not be negative")
    return float(value)


def _whole(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise WorkloadError(f"{where}: must be a whole number from {low} to {high}")
    return value


JOB_FIELDS = {
    "id",
    "share",
    "unit",
    "quantity",
    "priority",
    "submit_s",
    "duration_s",
    "priority_changes",
}


def _job(body: Any, where: str) -> WorkJob:
    if not isinstance(body, dict):
        raise WorkloadError(f"{where}: must be an object")
    unknown = sorted(set(body) - JOB_FIELDS)
    if unknown:
        raise WorkloadError(f"{where}: unknown field(s) {', '.join(unknown)}")
    missing = sorted({"id", "share", "unit", "submit_s", "duration_s"} - set(body))
    if missing:
        raise WorkloadError(f"{where}: missing {', '.join(missing)}")
    changes = body.get("priority_changes", [])
    if not isinstance(changes, list) or not all(
        isinstance(c, list) and len(c) == 2 for c in changes
    ):
        raise WorkloadError(f"{where}: priority_changes must be a list of [seconds, priority]")
    return WorkJob(
        id=str(body["id"]),
        share=str(body["share"]),
        unit=str(body["unit"]),
        quantity=_whole(body.get("quantity", 1), f"{where}.quantity", 1, 1_000_000),
        priority=_whole(body.get("priority", 0), f"{where}.priority", MIN_PRIORITY, MAX_PRIORITY),
        submit_s=_seconds(body["submit_s"], f"{where}.submit_s"),
        duration_s=_seconds(body["duration_s"], f"{where}.duration_s"),
        priority_changes=tuple(
            sorted(
                (
                    _seconds(at, f"{where}.priority_changes"),
                    _whole(p, f"{where}.priority_changes", MIN_PRIORITY, MAX_PRIORITY),
                )
                for at, p in changes
            )
        ),
    )


# -- writing ---------------------------------------------------------------------------------


def share_to_json(share: Share) -> dict:
    body: dict[str, Any] = {
        "name": share.name,
        "limits": dict(share.limits),
        "strategy": share.strategy.value,
        "in_share_preemption": share.in_share_preemption,
        "state": "ENABLED" if share.enabled else "DISABLED",
    }
    if share.strategy == "LEND_AND_BORROW":
        body["borrow_limit"] = share.borrow_limit
    return body


def config_to_json(config: QueueConfig) -> dict:
    return {
        "name": config.name,
        "capacity": dict(config.capacity),
        "ordering": config.ordering.value,
        "grace_s": config.grace_s,
        "capacity_changes": [
            {"at_s": at, "capacity": dict(change)} for at, change in config.capacity_changes
        ],
        "shares": [share_to_json(s) for s in config.shares],
    }


def workload_to_json(workload: Workload) -> dict:
    queues = []
    for queue in workload.queues:
        body = config_to_json(queue.config)
        body["jobs"] = [
            {
                "id": j.id,
                "share": j.share,
                "unit": j.unit,
                "quantity": j.quantity,
                "priority": j.priority,
                "submit_s": j.submit_s,
                "duration_s": j.duration_s,
                **(
                    {"priority_changes": [list(c) for c in j.priority_changes]}
                    if j.priority_changes
                    else {}
                ),
            }
            for j in queue.jobs
        ]
        queues.append(body)
    return {"name": workload.name, "notes": list(workload.notes), "queues": queues}
