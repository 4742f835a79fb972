"""Fair share over time: the planner's borrowing order by standing, and the decay."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import Job, Share, Snapshot, Strategy, check_plan, plan_tick
from scheduler.fairshare import Counts, Decayed, Policy, jain_index, standings
from scheduler.simulate import simulate
from scheduler.simulate.__main__ import main
from scheduler.simulate.fair_compare import with_policy
from scheduler.simulate.workload import workload_to_json
from tests.scheduler.builders import EXAMPLES, job, outcomes, snapshots, workload, workloads

DAY = 86_400.0


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(snapshots(), st.floats(min_value=0, max_value=1e9, allow_nan=False))
def test_equal_standings_plan_exactly_as_no_policy(snapshot, value):
    """The policy only breaks ties today's order leaves: with every share equal (a policy
    switched on before anyone borrowed), the plan is today's."""
    today = plan_tick(snapshot, 100.0)
    fair = replace(snapshot, fair_standing={s.name: value for s in snapshot.shares})
    assert plan_tick(fair, 100.0) == today


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(snapshots(), st.data())
def test_any_standings_keep_every_invariant(snapshot, data):
    values = st.floats(min_value=0, max_value=1e6, allow_nan=False)
    standing = {s.name: data.draw(values) for s in snapshot.shares}
    fair = replace(snapshot, fair_standing=standing)
    check_plan(fair, plan_tick(fair, 100.0))


def borrowers_snapshot(standing=None) -> Snapshot:
    """4 GPUs: owner lends 4; two borrowers each want 2 more than their limit of 0... of 1."""
    shares = (
        Share("owner", {"gpu": 2}, Strategy.LEND),
        Share("a", {"gpu": 1}, Strategy.LEND_AND_BORROW),
        Share("b", {"gpu": 1}, Strategy.LEND_AND_BORROW),
    )
    jobs = (
        Job("a-1", "a", "gpu", 1, 0, 1.0, dispatched_at=1.0),
        Job("b-1", "b", "gpu", 1, 0, 1.0, dispatched_at=1.0),
        Job("a-2", "a", "gpu", 2, 0, 10.0),  # older than b's: today it borrows first
        Job("b-2", "b", "gpu", 2, 0, 20.0),
    )
    return Snapshot({"gpu": 4}, shares, jobs, fair_standing=standing)


def started(snapshot) -> list[str]:
    return [d.job_id for d in plan_tick(snapshot, 100.0).dispatches]


def test_the_share_that_borrowed_least_borrows_first():
    assert started(borrowers_snapshot()) == ["a-2"]
    assert started(borrowers_snapshot({"a": 3600.0, "b": 0.0})) == ["b-2"]
    assert started(borrowers_snapshot({"a": 0.0, "b": 3600.0})) == ["a-2"]


def test_a_lender_takes_back_from_the_biggest_past_borrower_first():
    shares = (
        Share("owner", {"gpu": 2}, Strategy.LEND),
        Share("a", {"gpu": 1}, Strategy.LEND_AND_BORROW),
        Share("b", {"gpu": 1}, Strategy.LEND_AND_BORROW),
    )
    jobs = (
        Job("a-1", "a", "gpu", 2, 0, 1.0, dispatched_at=5.0),  # borrows 1
        Job("b-1", "b", "gpu", 2, 0, 1.0, dispatched_at=2.0),  # borrows 1, dispatched earlier
        Job("own", "owner", "gpu", 1, 0, 50.0),
    )
    today = plan_tick(Snapshot({"gpu": 4}, shares, jobs), 100.0)
    assert [p.job_id for p in today.dispatches[0].preempted] == ["a-1"]  # the newest goes
    fair = Snapshot({"gpu": 4}, shares, jobs, fair_standing={"a": 1.0, "b": 9.0})
    taken = plan_tick(fair, 100.0)
    assert [p.job_id for p in taken.dispatches[0].preempted] == ["b-1"]


def test_use_decays_by_half_each_half_life():
    use = Decayed()
    use.add_rate(2.0, 0.0, 3600.0, DAY)  # 2 instances for an hour
    fresh = use.as_of(3600.0, DAY)
    assert fresh == pytest.approx(7200.0, rel=0.03)  # a little decayed already
    assert use.as_of(3600.0 + DAY, DAY) == pytest.approx(fresh / 2)
    assert use.as_of(3600.0 + 3 * DAY, DAY) == pytest.approx(fresh / 8)
    exact = 2.0 * (1 - 2 ** (-3600 / DAY)) * DAY / math.log(2)
    assert fresh == pytest.approx(exact)


def test_standing_is_use_over_weight():
    policy = Policy(DAY, weights={"big": 4.0})
    assert standings({"big": 400.0, "small": 200.0}, policy, ["big", "small", "new"]) == {
        "big": 100.0,
        "small": 200.0,
        "new": 0.0,
    }


def test_jains_index():
    assert jain_index([5, 5, 5]) == pytest.approx(1.0)
    assert jain_index([9, 0, 0]) == pytest.approx(1 / 3)


# -- the simulator under a policy -----------------------------------------------------------


@settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=True)
@given(workloads(), st.sampled_from([5.0, 60.0, 3600.0]), st.sampled_from(list(Counts)))
def test_the_simulators_shortcuts_change_no_outcome_under_a_policy(load, half_life, counts):
    fair = with_policy(load, Policy(half_life, counts))
    fast = simulate(fair, verify_skips=True)  # check=True: each plan meets the invariants
    full = simulate(fair, fast=False)
    assert outcomes(fast) == outcomes(full)


def both_wait():
    """a borrowed 2 GPUs for an hour; then a's job and b's wait for the owner's to end."""
    shares = [
        Share("owner", {"gpu": 2}, Strategy.LEND),
        Share("a", {"gpu": 1}, Strategy.LEND_AND_BORROW),
        Share("b", {"gpu": 1}, Strategy.LEND_AND_BORROW),
    ]
    jobs = [
        job("a-past", "a", 0, 3600, quantity=3),
        job("hold", "owner", 3600, 100, quantity=2),
        job("a-next", "a", 3610, 600, quantity=3),
        job("b-next", "b", 3620, 600, quantity=3),
    ]
    return workload({"gpu": 4}, shares, jobs)


def test_when_both_wait_the_one_that_borrowed_less_goes_first():
    load = both_wait()
    assert simulate(load).outcome("a-next").start_s == 3700.0  # today: oldest first
    fair = simulate(with_policy(load, Policy(DAY)))
    assert fair.outcome("b-next").start_s == 3700.0
    assert fair.outcome("a-next").start_s == 4300.0
    (summary,) = fair.queue_summaries
    assert summary["shares"]["a"]["borrowed_hours"] == pytest.approx(2.0 + 2 * 600 / 3600, abs=1e-3)
    assert summary["borrowed_hours_jain"] is not None


def test_the_command_line_compares_with_and_without(tmp_path, capsys):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_to_json(both_wait())))
    assert main(["--workload", str(path), "--fair-share", "1d", "--compare", "--json"]) == 0
    printed = capsys.readouterr().out
    assert "Jain index of borrowed hours" in printed
    body = json.loads(printed.splitlines()[-1])
    off, on = body["queues_without_fair_share"][0], body["queues_with_fair_share"][0]
    assert off["shares"]["b"]["wait_p90_s"] > on["shares"]["b"]["wait_p90_s"]


@pytest.mark.parametrize("text", ["", "7x", "-1d", "0", "d"])
def test_a_bad_half_life_is_refused_with_what_to_write(text, capsys):
    assert main(["--kueue-baseline", f"--fair-share={text}"]) == 2
    assert "such as 7d, 12h" in capsys.readouterr().err


def test_compare_needs_a_policy(capsys):
    assert main(["--kueue-baseline", "--compare"]) == 2
    assert "--compare needs --fair-share" in capsys.readouterr().err
