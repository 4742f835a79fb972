"""Step 1 of a tick: jobs within their share's limit, and reclaiming lent capacity."""

from __future__ import annotations

from tests.scheduler.builders import (
    LAB,
    LEND,
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


def test_within_quota_job_starts_when_capacity_is_free():
    result = plan(snapshot(4, [share("a", 2)], [runnable("j1", "a", 2)]))
    assert started(result) == {"j1"}
    assert result.dispatches[0].borrowing is False


def test_gang_job_starts_only_when_all_instances_fit():
    snap = snapshot(3, [share("a", 4)], [running("r", "a", 2), runnable("big", "a", 2)])
    result = plan(snap)
    assert started(result) == set()
    assert reason(result, "big") == "WAITING_FOR_CAPACITY"


def test_lowest_usage_ratio_share_is_served_first():
    # Both shares are within their limits, but only one instance is free: the share using
    # the smaller fraction of its limit gets it.
    snap = snapshot(
        4,
        [share("busy", 4), share("quiet", 4)],
        [
            running("b0", "busy", 2),
            runnable("b1", "busy", 2, at=1),
            runnable("q1", "quiet", 2, at=2),
        ],
    )
    result = plan(snap)
    assert started(result) == {"q1"}
    assert reason(result, "b1") == "WAITING_FOR_CAPACITY"


def test_ratio_ties_go_to_higher_priority_then_older_job_then_share_name():
    shares = [share("a", 1), share("b", 1), share("c", 1)]
    by_priority = plan(
        snapshot(
            1,
            shares,
            [runnable("a1", "a", priority=1, at=1), runnable("b1", "b", priority=5, at=2)],
        )
    )
    assert started(by_priority) == {"b1"}
    by_age = plan(snapshot(1, shares, [runnable("a1", "a", at=2), runnable("b1", "b", at=1)]))
    assert started(by_age) == {"b1"}
    by_name = plan(snapshot(1, shares, [runnable("c1", "c", at=1), runnable("b1", "b", at=1)]))
    assert started(by_name) == {"b1"}


def test_borrowed_capacity_is_reclaimed_when_lender_gets_work():
    snap = snapshot(
        2,
        [share("lender", 1, LEND), share("borrower", 1, LAB)],
        [
            running("b1", "borrower", since=1),
            running("b2", "borrower", since=2),
            runnable("l1", "lender", at=3),
        ],
    )
    result = plan(snap)
    assert started(result) == {"l1"}
    assert preempted(result, "cross_share") == {"b2"}
    assert result.dispatches[0].preempted[0].preemptor_id == "l1"


def test_reclaim_takes_lowest_priority_then_most_recently_dispatched():
    jobs = [
        running("old_low", "borrower", priority=1, since=1),
        running("new_low", "borrower", priority=1, since=5),
        running("high", "borrower", priority=9, since=9),
        runnable("l1", "lender", at=10),
    ]
    snap = snapshot(3, [share("lender", 1, LEND), share("borrower", 1, LAB)], jobs)
    assert preempted(plan(snap)) == {"new_low"}


def test_reclaim_ties_go_to_the_job_later_in_share_order():
    jobs = [
        running("first", "borrower", priority=1, at=1, since=5),
        running("second", "borrower", priority=1, at=2, since=5),
        running("third", "borrower", priority=1, at=3, since=5),
        runnable("l1", "lender", at=10),
    ]
    snap = snapshot(3, [share("lender", 1, LEND), share("borrower", 1, LAB)], jobs)
    assert preempted(plan(snap)) == {"third"}


def test_reclaim_drops_victims_that_turn_out_not_to_be_needed():
    # Greedy order takes small (q=1) then big (q=2) to cover a need of 2; walking back, the
    # small one is not needed once the big one is taken.
    jobs = [
        running("base", "borrower", 1, priority=9, since=1),
        running("small", "borrower", 1, priority=1, since=1),
        running("big", "borrower", 2, priority=2, since=1),
        runnable("l1", "lender", 2, at=5),
    ]
    snap = snapshot(4, [share("lender", 2, LEND), share("borrower", 1, LAB)], jobs)
    result = plan(snap)
    assert preempted(result) == {"big"}
    assert started(result) == {"l1"}


def test_reclaim_never_pushes_a_victim_share_below_its_own_limit():
    # The borrower uses 3 against a limit of 2: only one instance is borrowed, so a lender
    # needing two cannot get them by preemption and waits.
    jobs = [
        running("b1", "borrower", since=1),
        running("b2", "borrower", since=2),
        running("b3", "borrower", since=3),
        runnable("l1", "lender", 2, at=5),
    ]
    snap = snapshot(3, [share("lender", 2, LEND), share("borrower", 2, LAB)], jobs)
    result = plan(snap)
    assert started(result) == set()
    assert preempted(result) == set()
    assert reason(result, "l1") == "WAITING_FOR_CAPACITY"


def test_a_borrowing_job_never_preempts_across_shares():
    # y is at its limit, so y2 would borrow: it must not take x's borrowed instance.
    jobs = [
        running("x1", "x", since=1),
        running("x2", "x", since=2),
        running("y1", "y", since=1),
        runnable("y2", "y", at=3),
    ]
    snap = snapshot(3, [share("x", 1, LAB), share("y", 1, LAB)], jobs)
    result = plan(snap)
    assert preempted(result) == set()
    assert reason(result, "y2") == "NOTHING_TO_BORROW"


def test_share_within_its_limit_never_loses_a_job_whatever_its_strategy():
    jobs = [
        running("r1", "res", since=1),
        running("l1", "lend", since=1),
        runnable("h1", "hungry", priority=9999, at=2),
    ]
    shares = [share("res", 1, RESERVE), share("lend", 1, LEND), share("hungry", 1, LAB)]
    result = plan(snapshot(2, shares, jobs))
    assert preempted(result) == set()
    assert reason(result, "h1") == "WAITING_FOR_CAPACITY"


def test_lowering_a_limit_does_not_preempt_by_itself():
    jobs = [running("a1", "a", since=1), running("a2", "a", since=1), running("a3", "a", since=1)]
    result = plan(snapshot(4, [share("a", 1, RESERVE)], jobs))
    assert preempted(result) == set()


def test_share_above_a_lowered_limit_is_reclaimed_when_another_share_needs_it():
    # "a" reserves but its limit was lowered to 1 while it runs 3: it counts as borrowing.
    jobs = [
        running("a1", "a", since=1),
        running("a2", "a", since=2),
        running("a3", "a", since=3),
        runnable("b1", "b", at=4),
    ]
    result = plan(snapshot(3, [share("a", 1, RESERVE), share("b", 2, LEND)], jobs))
    assert started(result) == {"b1"}
    assert preempted(result, "cross_share") == {"a3"}
