"""Step 2 (in-share preemption), head-of-line ordering, and where waiting jobs stand."""

from __future__ import annotations

from scheduler import Ordering
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


def test_higher_priority_job_preempts_lower_priority_job_in_its_share():
    shares = [share("a", 2, LEND, in_share=True)]
    jobs = [
        running("low", "a", priority=1, since=1),
        running("mid", "a", priority=5, since=1),
        runnable("urgent", "a", priority=9, at=3),
    ]
    result = plan(snapshot(2, shares, jobs))
    assert started(result) == {"urgent"}
    assert preempted(result, "in_share") == {"low"}
    assert reason(result, "low") == "SHARE_AT_LIMIT"


def test_equal_priority_never_preempts():
    shares = [share("a", 1, LEND, in_share=True)]
    jobs = [running("r", "a", priority=5, since=1), runnable("w", "a", priority=5, at=3)]
    result = plan(snapshot(1, shares, jobs))
    assert preempted(result) == set()


def test_without_in_share_preemption_higher_priority_waits():
    shares = [share("a", 1, LEND, in_share=False)]
    jobs = [running("r", "a", priority=1, since=1), runnable("w", "a", priority=9, at=3)]
    result = plan(snapshot(1, shares, jobs))
    assert preempted(result) == set()
    assert reason(result, "w") == "SHARE_AT_LIMIT"


def test_in_share_preemption_takes_the_minimal_set():
    shares = [share("a", 4, RESERVE, in_share=True)]
    jobs = [
        running("p1", "a", 1, priority=1, since=1),
        running("p2", "a", 2, priority=2, since=1),
        running("p3", "a", 1, priority=3, since=1),
        runnable("head", "a", 2, priority=9, at=5),
    ]
    result = plan(snapshot(4, shares, jobs))
    assert started(result) == {"head"}
    assert preempted(result, "in_share") == {"p2"}


def test_in_share_preemption_is_not_used_when_the_head_can_borrow():
    shares = [share("a", 1, LAB, in_share=True)]
    jobs = [running("low", "a", priority=1, since=1), runnable("high", "a", priority=9, at=3)]
    result = plan(snapshot(2, shares, jobs))
    assert started(result) == {"high"}
    assert preempted(result) == set()


def test_a_job_preempted_in_a_tick_does_not_start_again_in_that_tick():
    # t1 reclaims v from the borrowing share s; then w_high preempts w_low (2 instances) in its
    # own share and leaves one idle. v now heads s again and could borrow that instance, but
    # not in the tick that preempted it, and with STRICT ordering nothing may pass it.
    shares = [share("t", 1, LEND), share("s", 1, LAB), share("w", 2, LEND, in_share=True)]
    jobs = [
        running("s_base", "s", priority=9, since=1),
        running("v", "s", priority=1, since=2),
        running("w_low", "w", 2, priority=1, since=1),
        runnable("s_next", "s", at=7),
        runnable("t1", "t", at=5),
        runnable("w_high", "w", priority=9, at=6),
    ]
    result = plan(snapshot(4, shares, jobs))
    assert started(result) == {"t1", "w_high"}
    assert preempted(result) == {"v", "w_low"}
    assert reason(result, "v") == "WAITING_FOR_CAPACITY"
    assert reason(result, "s_next") == "BEHIND_SHARE_HEAD"


def test_strict_head_blocks_smaller_jobs_behind_it():
    jobs = [
        running("x", "a", 3),
        runnable("big", "a", 2, priority=5, at=1),
        runnable("small", "a", 1, priority=1, at=2),
    ]
    result = plan(snapshot(4, [share("a", 6)], jobs))
    assert started(result) == set()
    assert reason(result, "big") == "WAITING_FOR_CAPACITY"
    assert reason(result, "small") == "BEHIND_SHARE_HEAD"


def test_best_effort_lets_a_smaller_job_start_past_a_blocked_head():
    jobs = [
        running("x", "a", 3),
        runnable("big", "a", 2, priority=5, at=1),
        runnable("small", "a", 1, priority=1, at=2),
    ]
    result = plan(snapshot(4, [share("a", 6)], jobs, Ordering.BEST_EFFORT))
    assert started(result) == {"small"}
    assert reason(result, "big") == "WAITING_FOR_CAPACITY"


def test_best_effort_jobs_behind_a_blocked_head_never_preempt():
    shares = [share("a", 3, LEND), share("b", 1, LAB)]
    jobs = [
        running("b1", "b", since=1),
        running("b2", "b", since=2),
        running("a0", "a", since=1),
        runnable("big", "a", 2, priority=5, at=3),
        runnable("small", "a", 1, priority=1, at=4),
    ]
    # "big" is within quota but b has only one borrowed instance to give back, so it waits;
    # "small" would fit in that one instance but may not reclaim it: it is not the head.
    result = plan(snapshot(3, shares, jobs, Ordering.BEST_EFFORT))
    assert preempted(result) == set()
    assert started(result) == set()


def test_preempted_job_returns_to_its_place_in_the_share():
    shares = [share("lender", 1, LEND), share("b", 1, LAB)]
    jobs = [
        running("b_old", "b", priority=1, at=1, since=1),
        running("b_kept", "b", priority=5, since=1),
        runnable("b_new", "b", priority=1, at=9),
        runnable("l1", "lender", at=10),
    ]
    result = plan(snapshot(2, shares, jobs))
    assert preempted(result) == {"b_old"}
    assert result.pending["b_old"].position_in_share == 1
    assert result.pending["b_new"].position_in_share == 2


def test_queue_positions_interleave_shares_by_usage():
    shares = [share("a", 4), share("b", 4)]
    jobs = [running("a0", "a", 2), running("b0", "b", 2)]
    jobs += [runnable(f"a{i}", "a", 3, at=i) for i in (1, 2)]
    jobs += [runnable(f"b{i}", "b", 1, at=i) for i in (1, 2)]
    result = plan(snapshot(4, shares, jobs))
    # a is half used, b too; ties go to the higher priority then older head: a1 (at 1) first.
    order = sorted(result.pending, key=lambda j: result.pending[j].position_in_queue)
    assert order == ["a1", "b1", "a2", "b2"]
