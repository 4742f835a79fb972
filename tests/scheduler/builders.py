"""Small builders so planner tests read as the story they tell."""

from __future__ import annotations

from scheduler import Job, Ordering, Share, Snapshot, Strategy, check_plan, plan_tick
from scheduler.model import Plan

LEND = Strategy.LEND
RESERVE = Strategy.RESERVE
LAB = Strategy.LEND_AND_BORROW
NOW = 1000.0


def share(
    name: str,
    limit: int | dict[str, int] = 1,
    strategy: Strategy = LEND,
    *,
    borrow: int = -1,
    in_share: bool = False,
    enabled: bool = True,
    unit: str = "gpu",
) -> Share:
    limits = limit if isinstance(limit, dict) else {unit: limit}
    return Share(name, limits, strategy, borrow, in_share, enabled)


def runnable(
    job_id: str,
    share_name: str,
    q: int = 1,
    priority: int = 0,
    *,
    at: float = 0.0,
    unit: str = "gpu",
) -> Job:
    return Job(job_id, share_name, unit, q, priority, created_at=at)


def running(
    job_id: str,
    share_name: str,
    q: int = 1,
    priority: int = 0,
    *,
    at: float = 0.0,
    since: float = 0.0,
    unit: str = "gpu",
) -> Job:
    return Job(job_id, share_name, unit, q, priority, created_at=at, dispatched_at=since)


def snapshot(
    capacity: int | dict[str, int],
    shares: list[Share],
    jobs: list[Job],
    ordering: Ordering = Ordering.STRICT,
) -> Snapshot:
    cap = capacity if isinstance(capacity, dict) else {"gpu": capacity}
    return Snapshot(cap, tuple(shares), tuple(jobs), ordering)


def plan(snap: Snapshot) -> Plan:
    """Plan one tick and check it against every invariant, as the control plane does."""
    result = plan_tick(snap, NOW)
    check_plan(snap, result)
    return result


def started(result: Plan) -> set[str]:
    return set(result.dispatched_ids)


def preempted(result: Plan, kind: str | None = None) -> set[str]:
    return {p.job_id for p in result.preemptions if kind is None or p.kind == kind}


def reason(result: Plan, job_id: str) -> str:
    return result.pending[job_id].reason.value
