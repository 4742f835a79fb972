"""Reserved capacity: capacity over time, and the tick that fits what runs when one ends."""

from __future__ import annotations

import pytest

from scheduler import Job, PreemptionKind, Share, Snapshot, Strategy, check_plan, plan_tick
from scheduler.reservations import (
    Reservation,
    capacity_at,
    changes_after,
    ended,
    most_capacity,
)

PLAN = Reservation("plan-1", "g5", 2, start=10.0, end=20.0)
LATER = Reservation("plan-2", "g5", 3, start=15.0, end=30.0)


@pytest.mark.parametrize(
    ("now", "expected"),
    [(9.9, 4), (10.0, 6), (15.0, 9), (19.9, 9), (20.0, 7), (30.0, 4)],
)
def test_capacity_is_the_base_plus_the_reservations_active_now(now, expected):
    assert capacity_at({"g5": 4}, [PLAN, LATER], now) == {"g5": expected}


def test_most_capacity_counts_every_reservation_not_over_yet():
    assert most_capacity({"g5": 4}, [PLAN, LATER], 5.0) == {"g5": 9}
    assert most_capacity({"g5": 4}, [PLAN, LATER], 20.0) == {"g5": 7}
    assert most_capacity({}, [PLAN], 0.0) == {"g5": 2}


def test_ended_and_upcoming_changes():
    assert ended([PLAN, LATER], 20.0) == [PLAN]
    assert changes_after([PLAN, LATER], 12.0) == [
        (15.0, "+3 g5 (plan-2 starts)"),
        (20.0, "-2 g5 (plan-1 ends)"),
        (30.0, "-3 g5 (plan-2 ends)"),
    ]


def job(job_id, share, quantity=1, priority=0, created=0.0, dispatched=1.0):
    return Job(job_id, share, "g5", quantity, priority, created, dispatched)


def lend_and_borrow(name, limit):
    return Share(name, {"g5": limit}, Strategy.LEND_AND_BORROW, borrow_limit=-1)


def fitted(capacity, shares, jobs, target):
    snapshot = Snapshot({"g5": capacity}, tuple(shares), tuple(jobs), fit_to={"g5": target})
    plan = plan_tick(snapshot, 100.0)
    check_plan(snapshot, plan)
    return plan


def evicted(plan) -> list[str]:
    assert all(p.kind is PreemptionKind.CAPACITY for p in plan.evictions)
    return sorted(p.job_id for p in plan.evictions)


def test_borrowed_capacity_goes_first_lowest_priority_then_newest():
    shares = [lend_and_borrow("A", 1), Share("B", {"g5": 1})]
    jobs = [
        job("a-old", "A", priority=1, created=1.0),
        job("a-new", "A", priority=1, created=2.0),
        job("a-high", "A", priority=5, created=3.0),
        job("b", "B"),
    ]
    plan = fitted(2, shares, jobs, 2)
    assert evicted(plan) == ["a-new", "a-old"]
    assert plan.dispatches == ()
    # The victims wait again, each with a pending reason.
    assert set(plan.pending) == {"a-new", "a-old"}


def test_a_borrower_never_drops_below_its_limit_while_borrowed_capacity_remains():
    # A (limit 2) runs a 2-instance job and a 1-instance one: taking the big one would leave
    # A below its limit, so the small one goes although the big one is newer.
    shares = [lend_and_borrow("A", 2), Share("B", {"g5": 2})]
    jobs = [
        job("small", "A", created=1.0, dispatched=1.0),
        job("big", "A", quantity=2, created=2.0, dispatched=2.0),
        job("b", "B", quantity=1),
    ]
    assert evicted(fitted(3, shares, jobs, 3)) == ["small"]


def test_with_nobody_borrowing_the_share_furthest_over_its_limit_gives():
    shares = [Share("A", {"g5": 2}), Share("B", {"g5": 4})]
    jobs = [job(f"a{i}", "A", priority=i) for i in range(2)] + [
        job(f"b{i}", "B", priority=i) for i in range(3)
    ]
    # A uses all of its limit (2 of 2), B three quarters (3 of 4): A gives its lowest-priority
    # job; then B (3 of 4) is further over than A (1 of 2) and gives its own.
    assert evicted(fitted(5, shares, jobs, 4)) == ["a0"]
    assert evicted(fitted(5, shares, jobs, 3)) == ["a0", "b0"]


def test_a_gang_job_too_big_to_split_still_goes_when_nothing_smaller_frees_enough():
    shares = [Share("A", {"g5": 4})]
    jobs = [job("gang", "A", quantity=3)]
    plan = fitted(4, shares, jobs, 2)
    assert evicted(plan) == ["gang"]
    # It cannot start again in the tick that preempted it, though 2 instances are free.
    assert plan.dispatches == ()


def test_nothing_is_preempted_when_usage_already_fits_or_no_unit_was_cut():
    shares = [Share("A", {"g5": 4})]
    jobs = [job("a", "A", quantity=2)]
    assert fitted(4, shares, jobs, 2).evictions == ()
    snapshot = Snapshot({"g5": 1}, tuple(shares), tuple(jobs))  # lowered capacity: drains
    assert plan_tick(snapshot, 100.0).evictions == ()


def test_the_rest_of_the_tick_plans_on_what_fitting_left():
    shares = [lend_and_borrow("A", 1), Share("B", {"g5": 2})]
    jobs = [
        job("a1", "A", created=1.0),
        job("a2", "A", created=2.0),
        job("a3", "A", created=3.0),
        job("b1", "B"),
        job("b-waiting", "B", created=5.0, dispatched=None),
    ]
    # Capacity is 3 after the reservation: A's newest borrowed job goes to fit, then B's
    # waiting job, within its limit, takes back one more of A's borrowed instances.
    plan = fitted(3, shares, jobs, 3)
    assert evicted(plan) == ["a3"]
    assert plan.dispatched_ids == ("b-waiting",)
    assert [p.job_id for p in plan.dispatches[0].preempted] == ["a2"]


def test_what_step_zero_takes_back_is_not_handed_out_again_in_the_same_tick():
    """Found by the property test at more examples: a queue told to come down to 0 on a unit
    it could otherwise still use preempted a job, then started two others there, and the next
    tick took one of them back. The fit target bounds the whole tick."""
    shares = [
        Share("borrower", {"g5": 1}, Strategy.LEND_AND_BORROW, borrow_limit=-1, enabled=False),
        Share("owner", {"g5": 1}, Strategy.RESERVE, enabled=False),
    ]
    jobs = [
        job("running", "owner"),
        job("a", "borrower", dispatched=None),
        job("b", "borrower", dispatched=None),
    ]
    plan = fitted(2, shares, jobs, target=0)
    assert evicted(plan) == ["running"]
    assert plan.dispatches == ()
