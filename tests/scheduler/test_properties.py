"""Property-based tests: random snapshots never make the planner break an invariant.

The snapshots include what real queues drift into: capacity lowered below usage (and
reservations just ended, which the tick must fit by preempting), limits
lowered below usage, jobs on units their share no longer has a limit for, disabled shares,
gang jobs, several units per share, and many ties in priority and age.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import Job, Ordering, Share, Snapshot, Strategy, check_plan, plan_tick
from scheduler.invariants import InvariantViolation
from scheduler.model import PendingReason
from scheduler.victims import victim_order
from tests.scheduler.builders import EXAMPLES, runnable, running, share, snapshots


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(snapshots())
def test_no_plan_breaks_an_invariant(snapshot):
    check_plan(snapshot, plan_tick(snapshot, 100.0))


@settings(max_examples=EXAMPLES, deadline=None)
@given(snapshots(), st.randoms(use_true_random=False))
def test_the_same_snapshot_gives_the_same_plan_in_any_input_order(snapshot, rng: random.Random):
    first = plan_tick(snapshot, 100.0)
    jobs, share_list = list(snapshot.jobs), list(snapshot.shares)
    rng.shuffle(jobs)
    rng.shuffle(share_list)
    shuffled = Snapshot(
        snapshot.capacity, tuple(share_list), tuple(jobs), snapshot.ordering, snapshot.fit_to
    )
    assert plan_tick(snapshot, 100.0) == first
    assert plan_tick(shuffled, 100.0) == first


@settings(max_examples=EXAMPLES, deadline=None)
@given(snapshots())
def test_pending_reasons_agree_with_the_share_settings(snapshot):
    plan = plan_tick(snapshot, 100.0)
    jobs = {job.id: job for job in snapshot.jobs}
    shares_by_name = {share.name: share for share in snapshot.shares}
    for job_id, pending in plan.pending.items():
        job = jobs[job_id]
        share = shares_by_name[job.share]
        has_limit = share.limit(job.unit) > 0
        assert (pending.reason is PendingReason.NO_CAPACITY_LIMIT_FOR_UNIT) == (not has_limit)
        if pending.reason is PendingReason.BEHIND_SHARE_HEAD:
            assert snapshot.ordering is Ordering.STRICT
        if pending.reason is PendingReason.SHARE_AT_LIMIT:
            assert share.strategy is not Strategy.LEND_AND_BORROW
        if pending.reason in (PendingReason.BORROW_LIMIT_REACHED, PendingReason.NOTHING_TO_BORROW):
            assert share.strategy is Strategy.LEND_AND_BORROW
        if pending.reason is PendingReason.BORROW_LIMIT_REACHED:
            assert share.borrow_limit != -1


@settings(max_examples=EXAMPLES, deadline=None)
@given(snapshots())
def test_a_tick_on_its_own_outcome_takes_back_only_what_straddles_a_limit(snapshot):
    """Applying a plan and planning again never takes back capacity that was merely lent:
    a job the first tick started is preempted across shares only along with capacity its
    share holds within its limit, since a borrowing job is taken whole (docs/concepts.md, The
    scheduler). Either
    a victim straddles its share's limit (in-share preemption or lent capacity made it so),
    or it is an older job that lending put in front in victim order. Capacity lent alone is
    never worth taking back: the head that could not start on the first tick still could
    not, so a plan is otherwise stable."""
    _takes_back_only_what_straddles_a_limit(snapshot)


def _takes_back_only_what_straddles_a_limit(snapshot: Snapshot) -> None:
    first = plan_tick(snapshot, 100.0)
    started = set(first.dispatched_ids)
    victims = {p.job_id for p in first.preemptions}
    after = []
    for job in snapshot.jobs:
        if job.id in started:
            job = Job(
                job.id, job.share, job.unit, job.quantity, job.priority, job.created_at, 100.0
            )
        elif job.id in victims:
            job = Job(job.id, job.share, job.unit, job.quantity, job.priority, job.created_at)
        after.append(job)
    # Capacity the first tick fitted to (a reservation ended) stays away in the next.
    capacity = {
        unit: min(count, snapshot.fit_to.get(unit, count))
        for unit, count in snapshot.capacity.items()
    }
    second_snapshot = Snapshot(capacity, snapshot.shares, tuple(after), snapshot.ordering)
    second = plan_tick(second_snapshot, 101.0)
    check_plan(second_snapshot, second)
    borrowed_before = _borrowed_instances(snapshot)
    borrowed_after = _borrowed_instances(second_snapshot)
    quantity = {job.id: job.quantity for job in snapshot.jobs}
    for dispatch in second.dispatches:
        taken = {p.job_id for p in dispatch.preempted if p.kind == "cross_share"}
        if not taken & started:
            continue
        straddling = {j for j in taken if borrowed_after.get(j, 0) < quantity[j]}
        exposed = taken - started - borrowed_before.keys()
        assert straddling or exposed, f"{dispatch.job_id} takes back what was lent: {taken}"


@pytest.mark.parametrize(
    "lender",
    [
        share("s2", {"h100": 3}, Strategy.RESERVE, enabled=False),  # as drawn: DISABLED lends
        share("s2", {"h100": 3}, Strategy.LEND),
    ],
    ids=["disabled-reserve", "lend"],
)
def test_quota_a_tick_frees_by_preempting_a_lender_s_job_is_not_lent_for_one_tick(lender):
    reserve, borrow = Strategy.RESERVE, Strategy.LEND_AND_BORROW
    shares = (
        share("s0", {"a100": 1}, reserve, enabled=False),
        share("s1", {"a100": 1, "h100": 4}, borrow, enabled=False),
        lender,
        share("s3", {"a100": 1, "h100": 5, "l4": 1}, reserve, enabled=False),
        share("s4", {"a100": 1, "h100": 1}, reserve, enabled=False),
    )
    jobs = (
        runnable("j0", "s3", 2, unit="h100"),
        running("j4", "s2", 4, unit="h100"),
        runnable("j6", "s3", 3, unit="h100"),
        runnable("j8", "s1", 1, unit="h100"),
        running("j9", "s2", 3, unit="h100"),
        runnable("j11", "s1", 4, unit="h100"),
        running("j13", "s4", 4, unit="h100"),
        *(runnable(f"a{n}", "s0", 1, unit="a100") for n in range(7)),
    )
    capacity = {"a100": 0, "h100": 16, "l4": 0}
    snapshot = Snapshot(capacity, shares, jobs, Ordering.STRICT, fit_to={"a100": 0})
    _takes_back_only_what_straddles_a_limit(snapshot)


def _borrowed_instances(snapshot: Snapshot) -> dict[str, int]:
    """Per dispatched job holding any, the instances of its share's borrowed amount U - L
    attributed to it (in victim order)."""
    shares = {share.name: share for share in snapshot.shares}
    by_share_unit = defaultdict(list)
    for job in snapshot.jobs:
        if job.dispatched_at is not None:
            by_share_unit[job.share, job.unit].append(job)
    borrowed = {}
    for (name, unit), jobs in by_share_unit.items():
        left = sum(job.quantity for job in jobs) - shares[name].limit(unit)
        for job in sorted(jobs, key=victim_order, reverse=True):
            if left <= 0:
                break
            borrowed[job.id] = min(left, job.quantity)
            left -= job.quantity
    return borrowed


@settings(max_examples=EXAMPLES, deadline=None)
@given(snapshots())
def test_queue_positions_follow_from_share_ranks_and_counts(snapshot):
    from scheduler.positions import QueueNumbering

    plan = plan_tick(snapshot, 100.0)
    share_of = {job.id: job.share for job in snapshot.jobs}
    counts = dict.fromkeys(plan.share_ranking, 0)
    for job_id in plan.pending:
        counts[share_of[job_id]] += 1
    numbering = QueueNumbering([counts[name] for name in plan.share_ranking])
    rank = {name: index for index, name in enumerate(plan.share_ranking)}
    for job_id, pending in plan.pending.items():
        expected = numbering.position(rank[share_of[job_id]], pending.position_in_share)
        assert pending.position_in_queue == expected


@settings(max_examples=EXAMPLES, deadline=None)
@given(snapshots())
def test_a_plan_without_positions_decides_and_explains_the_same(snapshot):
    numbered = plan_tick(snapshot, 100.0)
    unnumbered = plan_tick(snapshot, 100.0, positions=False)
    assert unnumbered.dispatches == numbered.dispatches
    assert unnumbered.evictions == numbered.evictions
    assert unnumbered.share_ranking == numbered.share_ranking
    assert {job_id: p.reason for job_id, p in unnumbered.pending.items()} == {
        job_id: p.reason for job_id, p in numbered.pending.items()
    }
    assert {(p.position_in_share, p.position_in_queue) for p in unnumbered.pending.values()} <= {
        (0, 0)
    }


def test_the_checker_refuses_a_cross_share_victim_wholly_within_its_limit():
    """Take an honest plan that reclaims a borrowing job and name the job within the limit
    as its victim instead: the checker must say so."""
    shares = (
        Share("lender", {"gpu": 1}, Strategy.LEND),
        Share("borrower", {"gpu": 1}, Strategy.LEND_AND_BORROW),
    )
    jobs = (
        Job("inside", "borrower", "gpu", 1, 0, created_at=0.0, dispatched_at=1.0),
        Job("borrowed", "borrower", "gpu", 1, 0, created_at=0.0, dispatched_at=2.0),
        Job("l1", "lender", "gpu", 1, 0, created_at=3.0),
    )
    snapshot = Snapshot({"gpu": 2}, shares, jobs, Ordering.STRICT)
    honest = plan_tick(snapshot, 100.0)
    check_plan(snapshot, honest)
    (dispatch,) = honest.dispatches
    (preemption,) = dispatch.preempted
    assert preemption.job_id == "borrowed"
    wrong = replace(preemption, job_id="inside")
    forged = replace(honest, dispatches=(replace(dispatch, preempted=(wrong,)),))
    with pytest.raises(InvariantViolation, match="inside holds none of borrower's borrowed"):
        check_plan(snapshot, forged)
