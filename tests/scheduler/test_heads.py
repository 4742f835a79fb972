"""A plan from the heads of each share's line makes the full plan's decisions.

The oracle is plan_tick on the whole snapshot; the narrow plan reads, through
scheduler.heads.narrowed, only every dispatched job and the first few RUNNABLE jobs of each
share (widened where the plan runs short), as the control plane's tick reads its tables.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import Job, Ordering, Share, Snapshot, Strategy, check_plan, plan_tick
from scheduler.heads import Windows, narrowed, plan_from_heads
from scheduler.model import PendingReason
from tests.scheduler.builders import EXAMPLES, snapshots


def _narrow_plan(snapshot: Snapshot, first: int, explain: set[str]):
    return plan_from_heads(lambda windows: narrowed(snapshot, windows, explain), 100.0, first=first)


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(snapshots(), st.integers(1, 3))
def test_a_plan_from_the_heads_makes_the_full_plans_decisions(snapshot, first):
    full = plan_tick(snapshot, 100.0)
    runnable = {job.id for job in snapshot.jobs if job.dispatched_at is None}
    planned = _narrow_plan(snapshot, first, runnable)
    assert planned.plan.dispatches == full.dispatches
    assert planned.plan.evictions == full.evictions
    assert planned.plan.short_of == ()
    check_plan(planned.snapshot, planned.plan, positions=False)
    # Every job it held or was asked to explain has the reason the full plan gives it.
    narrow_reasons = {job_id: p.reason for job_id, p in planned.plan.pending.items()}
    assert narrow_reasons == {job_id: p.reason for job_id, p in full.pending.items()}
    assert planned.plan.share_ranking == full.share_ranking


@settings(max_examples=EXAMPLES, deadline=None)
@given(snapshots(), st.integers(1, 3))
def test_a_plan_of_too_few_heads_says_which_shares_it_ran_short_of(snapshot, first):
    """One read, never widened: either it ran short of nothing and decided as the full plan
    did, or it names the shares whose lines it needs more of."""
    windows = Windows(first)
    narrow = narrowed(snapshot, windows)
    plan = plan_tick(narrow, 100.0, positions=False)
    if not plan.short_of:
        assert plan.dispatches == plan_tick(snapshot, 100.0).dispatches
    assert set(plan.short_of) <= narrow.more_waiting


def _job(job_id, share, quantity=1, priority=0, created=0.0, dispatched=None, unit="gpu"):
    return Job(job_id, share, unit, quantity, priority, created, dispatched)


def test_a_share_that_starts_more_than_its_window_is_read_further():
    share = Share("ml", {"gpu": 8}, Strategy.RESERVE)
    jobs = tuple(_job(f"j{i}", "ml", created=float(i)) for i in range(20))
    snapshot = Snapshot({"gpu": 8}, (share,), jobs)
    planned = _narrow_plan(snapshot, 2, set())
    assert planned.reads == 3  # 2 jobs, then 8, then 32: the whole line
    assert planned.plan.dispatched_ids == tuple(f"j{i}" for i in range(8))


def test_jobs_a_share_can_never_hold_do_not_hide_its_head():
    """A window full of jobs on a unit the share has no limit for: the plan runs short, reads
    further, and starts the first job the share can hold."""
    share = Share("ml", {"gpu": 4}, Strategy.RESERVE)
    stranded = [_job(f"s{i}", "ml", created=float(i), unit="tpu") for i in range(3)]
    jobs = (*stranded, _job("real", "ml", created=10.0))
    snapshot = Snapshot({"gpu": 4, "tpu": 4}, (share,), jobs)
    first_read = plan_tick(narrowed(snapshot, Windows(3)), 100.0)
    assert first_read.short_of == ("ml",)
    planned = _narrow_plan(snapshot, 3, set())
    assert planned.plan.dispatched_ids == ("real",)


def test_jobs_beyond_the_window_are_explained_without_being_read_whole():
    share = Share("ml", {"gpu": 1}, Strategy.RESERVE)
    other = Share("cv", {"gpu": 1}, Strategy.LEND)
    jobs = (
        _job("running", "ml", dispatched=1.0),
        _job("head", "ml", created=1.0),
        _job("next", "ml", created=2.0),
        _job("new", "ml", created=3.0),
        _job("tpu", "ml", created=4.0, unit="tpu"),
    )
    snapshot = Snapshot({"gpu": 2}, (share, other), jobs, Ordering.STRICT)
    planned = _narrow_plan(snapshot, 2, {"new", "tpu"})
    assert [job.id for job in planned.snapshot.beyond] == ["new", "tpu"]
    assert planned.reads == 1
    assert {k: p.reason for k, p in planned.plan.pending.items()} == {
        "head": PendingReason.SHARE_AT_LIMIT,
        "next": PendingReason.BEHIND_SHARE_HEAD,
        "new": PendingReason.BEHIND_SHARE_HEAD,
        "tpu": PendingReason.NO_CAPACITY_LIMIT_FOR_UNIT,
    }
