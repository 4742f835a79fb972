"""A Slurm cluster's capacity as the planner counts it, from one look at the cluster.

Per capacity unit: on every usable node (not drained, down or silent) of the unit's
partition that has its GPU type and features, the GPUs jobs the portal did not start
("foreign" jobs) do not hold, in whole instances of gpus_per_unit (an instance is one task,
which never spans nodes). Draining a node shrinks capacity; a foreign job that starts takes
its GPUs out. Neither ever preempts: the planner sees less capacity and waits, as for any
drop of capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

from quotaportal.slurm.cli import Job, Node, Poll

HOLDING = {"RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "STOPPED", "RESIZING"}


@dataclass(frozen=True)
class UnitMap:
    """Where a capacity unit's instances are in Slurm."""

    partition: str
    gpu_type: str  # "" : any GPU
    constraint: str
    gpus_per_unit: int


def features_match(constraint: str, features: frozenset[str]) -> bool:
    """sbatch's --constraint as far as the portal counts it: names joined by & (all) or |
    (any). Anything fancier (counts, brackets) is left to Slurm and counted as a match."""
    if not constraint:
        return True
    if any(sign in constraint for sign in "[]*()"):
        return True
    return all(
        any(name.strip() in features for name in part.split("|")) for part in constraint.split("&")
    )


def _gpus(on_node: dict[str, int], gpu_type: str) -> int:
    return sum(on_node.values()) if not gpu_type else on_node.get(gpu_type, 0)


def foreign_jobs(poll: Poll, ours: set[str]) -> list[Job]:
    """Jobs holding GPUs now that the portal did not start."""
    return [
        job
        for job_id, job in poll.jobs.items()
        if job_id not in ours and job.state in HOLDING and job.gpus_on
    ]


def capacity_of(poll: Poll, units: dict[str, UnitMap], ours: set[str]) -> dict[str, int]:
    held: dict[str, dict[str, int]] = {}  # node -> GPU type -> GPUs foreign jobs hold
    for job in foreign_jobs(poll, ours):
        for node, kinds in job.gpus_on.items():
            for kind, count in kinds.items():
                held.setdefault(node, {})[kind] = held.get(node, {}).get(kind, 0) + count
    capacity = {}
    for unit, where in units.items():
        instances = 0
        for node in poll.nodes:
            if not (node.usable and where.partition in node.partitions):
                continue
            if not features_match(where.constraint, node.features):
                continue
            free = _gpus(node.gpus, where.gpu_type) - _gpus(held.get(node.name, {}), where.gpu_type)
            instances += max(0, free) // max(1, where.gpus_per_unit)
        capacity[unit] = instances
    return capacity


def node_summary(node: Node) -> dict:
    return {
        "name": node.name,
        "state": node.state,
        "usable": node.usable,
        "gpus": node.gpus,
        "partitions": sorted(node.partitions),
        "reason": node.reason,
    }


def foreign_summary(job: Job) -> dict:
    gpus = sum(sum(kinds.values()) for kinds in job.gpus_on.values())
    return {
        "job_id": job.job_id,
        "user": job.user,
        "name": job.name,
        "gpus": gpus,
        "nodes": sorted(job.gpus_on),
    }
