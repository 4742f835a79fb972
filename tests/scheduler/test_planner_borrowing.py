"""Step 3 of a tick: what may be lent, to whom, and how much."""

from __future__ import annotations

import pytest

from scheduler import Dispatch, InvariantViolation, Plan, check_plan
from tests.scheduler.builders import (
    LAB,
    LEND,
    NOW,
    RESERVE,
    plan,
    preempted,
    reason,
    runnable,
    running,
    share,
    snapshot,
    started,
)


def test_reserve_idle_capacity_is_never_lent():
    snap = snapshot(4, [share("res", 2, RESERVE), share("b", 1, LAB)], [runnable("b1", "b", 3)])
    result = plan(snap)
    assert started(result) == set()
    assert reason(result, "b1") == "NOTHING_TO_BORROW"


def test_reserve_share_uses_its_own_idle_capacity():
    snap = snapshot(2, [share("res", 2, RESERVE)], [runnable("r1", "res", 2)])
    assert started(plan(snap)) == {"r1"}


def test_disabled_reserve_share_lends_its_idle_capacity():
    snap = snapshot(
        4, [share("res", 2, RESERVE, enabled=False), share("b", 1, LAB)], [runnable("b1", "b", 3)]
    )
    result = plan(snap)
    assert started(result) == {"b1"}
    assert result.dispatches[0].borrowing is True


def test_disabled_share_still_runs_its_runnable_jobs():
    snap = snapshot(2, [share("off", 2, LEND, enabled=False)], [runnable("o1", "off", 2)])
    assert started(plan(snap)) == {"o1"}


def test_capacity_covered_by_no_share_is_lendable():
    snap = snapshot(10, [share("b", 2, LAB)], [runnable("b1", "b", 8)])
    assert started(plan(snap)) == {"b1"}


def test_borrow_limit_is_a_percentage_of_the_limit_rounded_down():
    # limit 3, borrow 50% -> 1.5 extra -> 1: the share may use 4 at most.
    shares = [share("b", 3, LAB, borrow=50)]
    jobs = [runnable(f"b{i}", "b", at=i) for i in range(6)]
    result = plan(snapshot(10, shares, jobs))
    assert started(result) == {"b0", "b1", "b2", "b3"}
    assert reason(result, "b4") == "BORROW_LIMIT_REACHED"
    assert reason(result, "b5") == "BEHIND_SHARE_HEAD"


def test_zero_borrow_limit_means_no_borrowing():
    result = plan(
        snapshot(
            5,
            [share("b", 1, LAB, borrow=0)],
            [runnable("b1", "b", at=1), runnable("b2", "b", at=2)],
        )
    )
    assert started(result) == {"b1"}
    assert reason(result, "b2") == "BORROW_LIMIT_REACHED"


def test_lend_and_reserve_shares_never_borrow():
    for strategy in (LEND, RESERVE):
        result = plan(
            snapshot(
                5, [share("s", 1, strategy)], [runnable("s1", "s", at=1), runnable("s2", "s", at=2)]
            )
        )
        assert started(result) == {"s1"}
        assert reason(result, "s2") == "SHARE_AT_LIMIT"


def test_borrowing_goes_to_the_oldest_job_first_across_shares():
    shares = [share("a", 1, LAB), share("b", 1, LAB), share("idle", 2, LEND)]
    jobs = [
        running("a0", "a"),
        running("b0", "b"),
        runnable("a1", "a", priority=9, at=5),
        runnable("b1", "b", priority=0, at=3),
    ]
    result = plan(snapshot(3, shares, jobs))
    assert started(result) == {"b1"}
    assert reason(result, "a1") == "NOTHING_TO_BORROW"


def test_borrowing_never_preempts():
    shares = [share("a", 1, LAB), share("b", 1, LAB)]
    jobs = [
        running("b0", "b", since=1),
        running("b1", "b", since=2),
        running("a0", "a", since=1),
        runnable("a1", "a", priority=9999, at=5),
    ]
    result = plan(snapshot(3, shares, jobs))
    assert started(result) == set()
    assert preempted(result) == set()


def test_a_share_never_uses_a_unit_it_has_no_limit_for():
    shares = [share("a", {"a100": 2}, LAB)]
    jobs = [runnable("h", "a", unit="h100", at=1), runnable("ok", "a", unit="a100", at=2)]
    result = plan(snapshot({"a100": 2, "h100": 8}, shares, jobs))
    # The stranded job can never start, so it holds up nobody behind it.
    assert started(result) == {"ok"}
    assert reason(result, "h") == "NO_CAPACITY_LIMIT_FOR_UNIT"


def test_multi_unit_share_is_accounted_per_unit():
    shares = [share("a", {"a100": 1, "h100": 2}, LEND)]
    jobs = [
        running("x", "a", unit="a100"),
        runnable("y", "a", 2, unit="h100", at=1),
        runnable("z", "a", unit="a100", at=2),
    ]
    result = plan(snapshot({"a100": 4, "h100": 2}, shares, jobs))
    assert started(result) == {"y"}
    assert reason(result, "z") == "SHARE_AT_LIMIT"


def test_capacity_lowered_below_usage_dispatches_nothing_on_that_unit():
    jobs = [running("a1", "a", 3), runnable("a2", "a", at=1), runnable("b1", "b", at=2)]
    result = plan(snapshot(2, [share("a", 4), share("b", 2, LAB)], jobs))
    assert started(result) == set()
    assert preempted(result) == set()


def _a_lender_loses_both_its_jobs(*extra):
    # "team" (limit 3) borrows 4 with two jobs, both holding borrowed instances in victim
    # order: "small" (dispatched last) holds 3, "big" holds 1. The owner's two jobs take them
    # back one each, so "team" ends the tick with nothing running and "small", at the front of
    # its share, able to come back within its limit.
    shares = [
        share("team", 3, LAB),
        share("owner", 5, LEND),
        share("other", 1, LAB),
        share("third", 2, LEND),
    ]
    jobs = [
        running("big", "team", 4, at=1, since=1),
        running("small", "team", 3, at=0, since=2),
        running("x", "other", 1, since=1),
        runnable("o1", "owner", 2, at=2),
        runnable("o2", "owner", 3, at=3),
        runnable("y", "other", 1, at=4),
        *extra,
    ]
    return shares, jobs


def test_what_a_tick_takes_back_below_a_lenders_limit_is_not_lent_that_tick():
    # Lent, the 3 instances freed below team's limit would start "y" only for "small" to
    # take it back the next tick, within team's quota.
    shares, jobs = _a_lender_loses_both_its_jobs()
    first = plan(snapshot(9, shares, jobs))
    assert started(first) == {"o1", "o2"}
    assert preempted(first, "cross_share") == {"small", "big"}
    assert reason(first, "y") == "NOTHING_TO_BORROW"
    after = [
        running("o1", "owner", 2, at=2, since=NOW),
        running("o2", "owner", 3, at=3, since=NOW),
        running("x", "other", 1, since=1),
        runnable("small", "team", 3, at=0),
        runnable("big", "team", 4, at=1),
        runnable("y", "other", 1, at=4),
    ]
    second = plan(snapshot(9, shares, after))
    assert "small" in started(second)
    assert preempted(second) == set()


def test_a_job_within_its_own_quota_may_start_on_what_is_held():
    # "third" is within its limit: what it takes is its own, never taken back, so the hold
    # does not stop it.
    shares, jobs = _a_lender_loses_both_its_jobs(runnable("z", "third", 2, at=5))
    result = plan(snapshot(9, shares, jobs))
    assert started(result) == {"o1", "o2", "z"}
    assert reason(result, "y") == "NOTHING_TO_BORROW"


def test_the_checker_refuses_a_plan_that_lends_what_is_held():
    shares, jobs = _a_lender_loses_both_its_jobs()
    snap = snapshot(9, shares, jobs)
    honest = plan(snap)
    lending = Plan(honest.now, (*honest.dispatches, Dispatch("y", True, ())))
    with pytest.raises(InvariantViolation, match="y borrows capacity held for jobs preempted"):
        check_plan(snap, lending, pending=False)


def test_a_share_losing_jobs_to_both_kinds_of_preemption_is_held_for_once():
    # Capacity was lowered below usage (10 on 9). "lab" loses its 4-instance job to the
    # reserving share, then two low-priority ones to its own head: each loss changes what is
    # held for it, and the held capacity, counted once, leaves nothing for "lab"'s borrower.
    shares = [share("lab", 6, LAB, in_share=True), share("res", 4, RESERVE, enabled=False)]
    jobs = [
        running("wide", "lab", 4, priority=3, at=5, since=0),
        running("pair", "lab", 2, priority=3, since=0),
        running("one", "lab", 1, priority=3, since=0),
        running("low1", "lab", 1, since=0),
        running("low2", "lab", 1, since=0),
        running("r1", "res", 1, since=0),
        runnable("r3", "res", 3, at=1),
        runnable("high", "lab", 2, priority=3, at=2),
        runnable("borrower", "lab", 2),
    ]
    result = plan(snapshot(9, shares, jobs))
    assert started(result) == {"r3", "high"}
    assert preempted(result, "cross_share") == {"wide"}
    assert preempted(result, "in_share") == {"low1", "low2"}
