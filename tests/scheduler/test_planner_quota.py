"""Step 1 of a tick: jobs within their share's limit, and reclaiming lent capacity."""

from __future__ import annotations

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


def test_a_job_straddling_its_shares_limit_is_taken_back_whole():
    # The borrower's one job holds 2 instances of its limit and 2 borrowed ones: it is a
    # borrowing job, so the lender takes it back whole, although that leaves its share idle.
    jobs = [running("big", "borrower", 4, priority=5, since=1), runnable("l1", "lender", 2, at=2)]
    snap = snapshot(4, [share("lender", 2, LEND), share("borrower", 2, LAB)], jobs)
    result = plan(snap)
    assert started(result) == {"l1"}
    assert preempted(result, "cross_share") == {"big"}
    assert reason(result, "big") == "NOTHING_TO_BORROW"


def test_borrowed_instances_go_to_jobs_in_victim_order_and_the_rest_are_safe():
    # Limit 2, use 5: the 3 borrowed instances go to "newest" (1) and "middle" (2), the two
    # most recently dispatched; "oldest" sits wholly within the limit and is never a victim,
    # even when the lender would need it.
    jobs = [
        running("oldest", "borrower", 2, since=1),
        running("middle", "borrower", 2, since=2),
        running("newest", "borrower", 1, since=3),
        runnable("l1", "lender", 5, at=4),
    ]
    snap = snapshot(5, [share("lender", 5, LEND), share("borrower", 2, LAB)], jobs)
    result = plan(snap)
    assert started(result) == set()
    assert preempted(result) == set()
    assert reason(result, "l1") == "WAITING_FOR_CAPACITY"
    smaller = snapshot(
        5,
        [share("lender", 5, LEND), share("borrower", 2, LAB)],
        [
            *jobs[:3],
            runnable("l1", "lender", 3, at=4),
        ],
    )
    result = plan(smaller)
    assert started(result) == {"l1"}
    assert preempted(result, "cross_share") == {"middle", "newest"}


def test_a_reserving_share_losing_a_straddler_keeps_its_own_part_idle():
    # "res" reserves 2 but runs one 3-instance job (its limit was lowered): taking it frees
    # 3, of which 2 are the reserving share's own idle capacity again, so only 1 goes to the
    # preemptor. A 2-instance lender job cannot start that way, a 1-instance one can.
    shares = [share("res", 2, RESERVE), share("lender", 2, LEND)]
    running_job = running("straddler", "res", 3, since=1)
    too_big = plan(snapshot(3, shares, [running_job, runnable("l2", "lender", 2, at=2)]))
    assert started(too_big) == set()
    assert preempted(too_big) == set()
    fits = plan(snapshot(3, shares, [running_job, runnable("l1", "lender", 1, at=2)]))
    assert started(fits) == {"l1"}
    assert preempted(fits, "cross_share") == {"straddler"}


def test_a_share_below_its_limit_after_losing_a_straddler_starts_its_own_head():
    # "wide" can never hold its 4-instance job again (its limit is 2 and it may not borrow),
    # so that victim leads nobody: its 1-instance job starts within its limit the same tick.
    jobs = [
        running("wide_job", "wide", 4, priority=9, since=1),
        runnable("w1", "wide", 1, at=2),
        runnable("l1", "lender", 2, at=3),
    ]
    snap = snapshot(4, [share("wide", 2, LAB, borrow=0), share("lender", 2, LEND)], jobs)
    result = plan(snap)
    assert preempted(result, "cross_share") == {"wide_job"}
    assert started(result) == {"l1", "w1"}


def test_a_share_pushed_below_its_limit_takes_back_its_own_in_the_same_tick():
    # The lender takes back "wide"'s straddling job; "wide" is then below its limit with a
    # job waiting, so within the same tick it reclaims the instance "hog" borrows.
    jobs = [
        running("wide_job", "wide", 4, priority=9, since=1),
        running("h1", "hog", 1, since=1),
        running("h2", "hog", 1, since=2),
        runnable("w1", "wide", 1, at=2),
        runnable("l1", "lender", 4, at=3),
    ]
    shares = [share("wide", 2, LAB, borrow=0), share("hog", 1, LAB), share("lender", 4, LEND)]
    result = plan(snapshot(6, shares, jobs))
    assert started(result) == {"l1", "w1"}
    assert preempted(result, "cross_share") == {"wide_job", "h2"}


def test_lending_to_a_share_exposes_its_older_job_to_take_back():
    # Tick 1: the lender's 4-instance head cannot start (3 free, nobody borrows), so the idle
    # capacity is lent to "lab"'s new job. That puts lab above its limit with its older,
    # lower-priority job first in victim order: both are now borrowing jobs, and tick 2
    # takes both back for the lender's head.
    shares = [share("lab", 1, LAB), share("lender", 4, LEND)]
    old = running("old", "lab", 1, priority=0, since=1)
    waiting = [runnable("new", "lab", 2, 1, at=2), runnable("l1", "lender", 4, at=3)]
    first = plan(snapshot(4, shares, [old, *waiting]))
    assert started(first) == {"new"}
    assert reason(first, "l1") == "WAITING_FOR_CAPACITY"
    new = running("new", "lab", 2, priority=1, at=2, since=NOW)
    second = plan(snapshot(4, shares, [old, new, runnable("l1", "lender", 4, at=3)]))
    assert started(second) == {"l1"}
    assert preempted(second, "cross_share") == {"old", "new"}
