"""Small builders so planner tests read as the story they tell."""

from __future__ import annotations

import os

from hypothesis import strategies as st

from scheduler import Job, Ordering, Share, Snapshot, Strategy, check_plan, plan_tick
from scheduler.model import Plan
from scheduler.simulate import QueueConfig, QueueWorkload, WorkJob, Workload

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


# Random fleets for the property tests (hypothesis strategies): capacity lowered below usage
# and reservations just ended (the tick must fit by preempting), limits lowered below usage,
# jobs on units their share no longer has a limit for, disabled shares, gang jobs, several
# units per share, and many ties in priority and age.
UNITS = ("a100", "h100", "l4")
# QP_PROPERTY_EXAMPLES=5000 for a deeper local run; CI uses the default, derandomized.
EXAMPLES = int(os.environ.get("QP_PROPERTY_EXAMPLES", "200"))


@st.composite
def shares(draw, count: int) -> list[Share]:
    result = []
    for index in range(count):
        units = draw(st.lists(st.sampled_from(UNITS), min_size=1, max_size=3, unique=True))
        strategy = draw(st.sampled_from(list(Strategy)))
        borrow = (
            draw(st.sampled_from([-1, 0, 25, 50, 100, 200]))
            if strategy is Strategy.LEND_AND_BORROW
            else -1
        )
        result.append(
            Share(
                name=f"s{index}",
                limits={u: draw(st.integers(1, 6)) for u in units},
                strategy=strategy,
                borrow_limit=borrow,
                in_share_preemption=draw(st.booleans()),
                enabled=draw(st.integers(0, 4)) > 0,
            )
        )
    return result


@st.composite
def snapshots(draw) -> Snapshot:
    share_list = draw(shares(draw(st.integers(1, 5))))
    jobs = []
    for index in range(draw(st.integers(0, 40))):
        owner = draw(st.sampled_from(share_list))
        # Mostly units the share has a limit for, sometimes one it lost.
        unit = draw(st.sampled_from(sorted(owner.limits) * 4 + list(UNITS)))
        dispatched = draw(st.booleans())
        jobs.append(
            Job(
                id=f"j{index}",
                share=owner.name,
                unit=unit,
                quantity=draw(st.integers(1, 4)),
                priority=draw(st.integers(0, 4)),
                created_at=float(draw(st.integers(0, 8))),
                dispatched_at=float(draw(st.integers(0, 8))) if dispatched else None,
            )
        )
    capacity = {u: draw(st.integers(0, 16)) for u in UNITS}
    ordering = draw(st.sampled_from(list(Ordering)))
    # Sometimes a reservation has just ended: units the tick must fit into a smaller target.
    fit_to = {}
    if draw(st.integers(0, 2)) == 0:
        cut = draw(st.lists(st.sampled_from(UNITS), min_size=1, max_size=2, unique=True))
        fit_to = {u: draw(st.integers(0, capacity[u])) for u in cut}
    return Snapshot(capacity, tuple(share_list), tuple(jobs), ordering, fit_to)


# -- simulated workloads ----------------------------------------------------------------


def workload(capacity, shares, jobs, **config) -> Workload:
    queue = QueueWorkload(QueueConfig("q", capacity, tuple(shares), **config), tuple(jobs))
    return Workload("test", (queue,))


def job(id, share, at, seconds, priority=0, quantity=1, unit="gpu", changes=()):
    return WorkJob(id, share, unit, quantity, priority, float(at), float(seconds), tuple(changes))


@st.composite
def workloads(draw):
    units = ("a", "b")
    share_count = draw(st.integers(1, 5))
    shares = []
    for index in range(share_count):
        strategy = draw(st.sampled_from(list(Strategy)))
        borrow = draw(st.sampled_from([-1, 0, 50, 200])) if strategy == "LEND_AND_BORROW" else -1
        limits = {
            u: draw(st.integers(1, 4)) for u in draw(st.sets(st.sampled_from(units), min_size=1))
        }
        shares.append(
            Share(f"s{index}", limits, strategy, borrow, draw(st.booleans()), draw(st.booleans()))
        )
    jobs = []
    for index in range(draw(st.integers(1, 30))):
        share = draw(st.sampled_from(shares))
        changes = draw(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 9)), max_size=1))
        jobs.append(
            job(
                f"j{index}",
                share.name,
                draw(st.integers(0, 40)),
                draw(st.integers(0, 15)),
                priority=draw(st.integers(0, 9)),
                quantity=draw(st.integers(1, 3)),
                unit=draw(st.sampled_from(units)),
                changes=[(float(t), p) for t, p in changes],
            )
        )
    capacity = {u: draw(st.integers(0, 8)) for u in units}
    ordering = draw(st.sampled_from(list(Ordering)))
    grace = draw(st.sampled_from([0.0, 0.0, 2.0]))
    return workload(capacity, shares, jobs, ordering=ordering, grace_s=grace)


def outcomes(result):
    return {
        job_id: (o.start_s, o.end_s, o.runs, tuple(o.preemptions))
        for run in result.runs
        for job_id, o in run.outcomes.items()
    }
