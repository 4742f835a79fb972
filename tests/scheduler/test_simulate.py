"""The simulator against outcomes worked out by hand, and against itself without shortcuts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import Share, Strategy
from scheduler.simulate import QueueConfig, QueueWorkload, Running, WorkJob, Workload, simulate
from scheduler.simulate.__main__ import main
from scheduler.simulate.accuracy import estimate_accuracy
from scheduler.simulate.estimate import (
    DEFAULT_DURATION_S,
    Durations,
    estimate_ranges,
    estimate_starts,
    scenarios_with_arrivals,
)
from scheduler.simulate.loaders import alibaba_openb, fleet, kueue_baseline
from scheduler.simulate.workload import (
    capacity_bound_s,
    load_workload,
    scaled,
    workload_to_json,
)
from tests.scheduler.builders import job, outcomes, workload, workloads

EXAMPLES = int(os.environ.get("QP_PROPERTY_EXAMPLES", "200"))
SAMPLE_TRACE = Path(__file__).parents[2] / "scheduler/simulate/traces/alibaba-openb-sample"
FULL_TRACE = Path(os.environ.get("QP_TRACE_DIR", Path(__file__).parents[3] / "shared/traces"))


def times(result, job_id):
    outcome = result.outcome(job_id)
    return outcome.start_s, outcome.end_s


def test_jobs_queue_behind_a_full_share_and_start_as_capacity_frees():
    result = simulate(
        workload(
            {"gpu": 2},
            [Share("a", {"gpu": 2}, Strategy.LEND)],
            [job("j1", "a", 0, 10), job("j2", "a", 0, 10), job("j3", "a", 1, 5)],
        )
    )
    assert times(result, "j1") == (0, 10)
    assert times(result, "j2") == (0, 10)
    assert times(result, "j3") == (10, 15)
    assert result.summary["makespan_s"] == 15
    assert result.summary["capacity_bound_s"] == 12.5  # 25 GPU-seconds of work on 2 GPUs
    assert result.summary["wait_p99_s"] == 9


def test_lent_capacity_is_reclaimed_and_the_victim_reruns_from_the_start():
    result = simulate(
        workload(
            {"gpu": 2},
            [
                Share("a", {"gpu": 1}, Strategy.LEND_AND_BORROW),
                Share("b", {"gpu": 1}, Strategy.LEND),
            ],
            [job("a1", "a", 0, 10), job("a2", "a", 0, 10), job("b1", "b", 2, 10)],
        )
    )
    assert times(result, "a2") == (0, 20)  # borrowed at 0, reclaimed at 2, ran again 10-20
    assert result.outcome("a2").preemptions == [(2.0, "cross_share")]
    assert result.outcome("a2").runs == 2
    assert times(result, "b1") == (2, 12)
    assert result.summary["preemptions_by_kind"] == {"cross_share": 1}
    # a2 borrowed one GPU from 0 to 2: 2 instance-seconds.
    assert result.queue_summaries[0]["shares"]["a"]["borrowed_hours"] == round(2 / 3600, 4)


def test_a_raised_priority_preempts_within_the_share_after_the_grace_period():
    jobs = [job("low", "a", 0, 10, priority=1), job("late", "a", 1, 10, 1, changes=[(3, 5)])]
    share = Share("a", {"gpu": 1}, Strategy.LEND, in_share_preemption=True)
    plain = simulate(workload({"gpu": 1}, [share], jobs))
    assert times(plain, "late") == (3, 13)
    assert times(plain, "low") == (0, 23)
    assert plain.outcome("low").preemptions == [(3.0, "in_share")]
    graced = simulate(workload({"gpu": 1}, [share], jobs, grace_s=2))
    assert times(graced, "late") == (5, 15)  # dispatched at 3, its process starts at 5
    assert times(graced, "low") == (0, 25)


def test_a_chain_of_preemptions_unwinds_in_priority_order():
    share = Share("a", {"gpu": 1}, Strategy.LEND, in_share_preemption=True)
    jobs = [
        job("j1", "a", 0, 10, priority=1),
        job("j2", "a", 2, 10, priority=5),  # preempts j1
        job("j3", "a", 4, 10, priority=9),  # preempts j2
    ]
    result = simulate(workload({"gpu": 1}, [share], jobs))
    assert times(result, "j3") == (4, 14)
    assert times(result, "j2") == (2, 24)  # ran 2-4, then again 14-24
    assert times(result, "j1") == (0, 34)  # ran 0-2, then again 24-34
    assert result.outcome("j1").preemptions == [(2.0, "in_share")]
    assert result.outcome("j2").preemptions == [(4.0, "in_share")]
    assert result.outcome("j2").dispatches == [2.0, 14.0]


def test_reclaim_takes_the_borrowing_shares_lowest_priority_job_even_if_it_came_first():
    shares = [
        Share("b", {"gpu": 1}, Strategy.LEND_AND_BORROW, in_share_preemption=True),
        Share("c", {"gpu": 1}, Strategy.LEND),
    ]
    jobs = [
        job("b0", "b", 0, 100, priority=1),
        job("b1", "b", 1, 100, priority=9),  # borrows the second GPU
        job("c1", "c", 5, 100),
    ]
    result = simulate(workload({"gpu": 2}, shares, jobs))
    assert times(result, "b1") == (1, 101)
    assert result.outcome("b0").preemptions == [(5.0, "cross_share")]
    # Back in its share b0 may not preempt b1 (higher priority): it waits for b1 to end.
    assert times(result, "b0") == (0, 201)
    assert times(result, "c1") == (5, 105)
    assert result.summary["preemptions_by_kind"] == {"cross_share": 1}


def test_a_fixed_tick_runs_dispatched_jobs_from_the_next_tick_like_a_simulated_environment():
    result = simulate(
        workload(
            {"gpu": 1},
            [Share("a", {"gpu": 1}, Strategy.LEND)],
            [job("j1", "a", 0, 3), job("j2", "a", 0, 1)],
        ),
        tick_s=2,
    )
    assert times(result, "j1") == (2, 6)  # dispatched at 0, running at 2, over by the tick at 6
    assert times(result, "j2") == (8, 10)  # dispatched at 6


def test_capacity_that_arrives_later_starts_waiting_jobs_then():
    result = simulate(
        workload(
            {"gpu": 0},
            [Share("a", {"gpu": 1}, Strategy.LEND)],
            [job("j1", "a", 0, 4)],
            capacity_changes=((5.0, {"gpu": 1}),),
        )
    )
    assert times(result, "j1") == (5, 9)
    assert result.summary["idle_instance_hours_while_waiting"] == 0


def test_idle_capacity_while_jobs_wait_is_counted():
    # A RESERVE share holds its idle GPU while the LEND share's second job waits 10 s.
    result = simulate(
        workload(
            {"gpu": 2},
            [Share("r", {"gpu": 1}, Strategy.RESERVE), Share("l", {"gpu": 1}, Strategy.LEND)],
            [job("l1", "l", 0, 10), job("l2", "l", 0, 10)],
        )
    )
    assert times(result, "l2") == (10, 20)
    assert result.queue_summaries[0]["idle_instance_hours_while_waiting"] == round(10 / 3600, 4)


def test_the_kueue_baseline_has_the_published_shape():
    baseline = kueue_baseline()
    assert baseline.job_count == 15_000
    assert len(baseline.queues) == 5
    assert {len(q.config.shares) for q in baseline.queues} == {6}
    assert capacity_bound_s(baseline.queues[0]) == pytest.approx(66.0)


def test_the_alibaba_trace_maps_qos_classes_to_shares_and_models_to_units():
    """On the sample the repository ships (every 20th row of the trace)."""
    trace = alibaba_openb(SAMPLE_TRACE)
    (queue,) = trace.queues
    assert queue.config.capacity == {"G2": 232, "T4": 42, "G3": 24, "P100": 10, "V100M16": 6}
    assert {s.name: s.strategy for s in queue.config.shares}["latency-sensitive"] == "RESERVE"
    assert len(queue.jobs) == 303
    assert any("QoS" in note for note in trace.notes)
    assert "2 no node of its GPU model" in trace.notes[-1], "a pod no node can run is left out"
    assert simulate(trace).summary["jobs"] == 303


@pytest.mark.skipif(not FULL_TRACE.is_dir(), reason="the full trace is not here (QP_TRACE_DIR)")
def test_the_full_alibaba_trace_loads_every_gpu_pod():
    trace = alibaba_openb(FULL_TRACE)
    (queue,) = trace.queues
    assert queue.config.capacity["G2"] == 4392
    assert len(queue.jobs) == 6203


# -- the shortcuts change nothing ---------------------------------------------------------------


@pytest.mark.slow  # a minute of simulations: the integration lane, not `make test-fast`
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True)
@given(workloads(), st.sampled_from([None, None, 1.0, 3.0]))
def test_skipped_ticks_folded_shares_and_short_queues_change_no_outcome(load, tick):
    # check=True: every plan of both runs also passes the invariant check.
    fast = simulate(load, tick_s=tick, verify_skips=True)
    full = simulate(load, tick_s=tick, fast=False)
    assert outcomes(fast) == outcomes(full)
    assert fast.summary["makespan_s"] == full.summary["makespan_s"]


@settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=True)
@given(workloads())
def test_the_same_workload_gives_the_same_result_in_any_job_order(load):
    (queue,) = load.queues
    shuffled = Workload("r", (QueueWorkload(queue.config, tuple(reversed(queue.jobs))),))
    assert outcomes(simulate(load)) == outcomes(simulate(shuffled))


# -- the command line ------------------------------------------------------------------------


def test_the_command_ends_with_one_json_line(tmp_path, capsys):
    load = workload(
        {"gpu": 2},
        [Share("a", {"gpu": 2}, Strategy.LEND_AND_BORROW, 100, True)],
        [job("j1", "a", 0, 10), job("j2", "a", 0, 10, changes=[(1, 3)]), job("j3", "a", 1, 5)],
    )
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload_to_json(load)))
    assert load_workload(path).queues == load.queues  # what is written reads back the same
    assert main(["--workload", str(path), "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in (
        "jobs",
        "makespan_s",
        "capacity_bound_s",
        "wait_p50_s",
        "wait_p99_s",
        "preemptions",
        "wall_s",
    ):
        assert key in last
    assert last["jobs"] == 3
    assert last["makespan_s"] == 15


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"capacity": {"gpu": 1}, "shares": [], "jobs": []}', "'shares' must be a non-empty"),
        (
            '{"capacity": {"gpu": 1}, "shares": [{"name": "a", "limits": {"gpu": 1}, '
            '"strategy": "LEND"}], "jobs": [{"id": "x", "share": "b", "unit": "gpu", '
            '"submit_s": 0, "duration_s": 1}]}',
            "unknown share 'b'",
        ),
        (
            '{"capacity": {"gpu": 1}, "shares": [{"name": "a", "limits": {"gpu": 1}, '
            '"strategy": "LEND"}], "jobs": [{"id": "x", "share": "a", "unit": "gpu", '
            '"submit_s": -1, "duration_s": 1}]}',
            "must not be negative",
        ),
    ],
)
def test_a_bad_workload_file_is_refused_with_what_to_fix(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["--workload", str(path)]) == 2
    assert message in capsys.readouterr().err


# -- estimates -------------------------------------------------------------------------------


def test_waiting_jobs_are_estimated_to_start_as_the_running_ones_end():
    config = QueueConfig("q", {"gpu": 1}, (Share("a", {"gpu": 1}, Strategy.LEND),))
    running = [Running(job("r", "a", 90, 60), dispatched_at_s=90, remaining_s=10)]
    waiting = [job("w1", "a", 95, 5), job("w2", "a", 96, 7), job("w0", "a", 99, 3, priority=5)]
    starts = estimate_starts(config, running, waiting, now=100)
    # w0 has the higher priority and goes first, then w1 and w2 in submit order.
    assert starts == {"w0": 110, "w1": 113, "w2": 118}


def test_the_expected_start_counts_on_arrivals_going_ahead_while_they_keep_coming():
    """Urgent jobs arrived every 5 s lately: the expected start assumes they keep coming and
    go ahead (without them the waiting job would start at 110); only real jobs get a range."""
    config = QueueConfig("q", {"gpu": 1}, (Share("a", {"gpu": 1}, Strategy.LEND),))
    running = [Running(job("r", "a", 90, 60), dispatched_at_s=90, remaining_s=10)]
    waiting = [job("w", "a", 91, 10)]
    urgent = [job(f"u{i}", "a", 90 + 5 * i, 10, priority=9) for i in range(3)]
    scenarios = dict.fromkeys((0.1, 0.5, 0.9), (running, waiting))
    assert estimate_starts(config, running, waiting, now=100) == {"w": 110}

    ranges = estimate_ranges(
        config, scenarios_with_arrivals(config, scenarios, urgent, now=100), now=100
    )

    assert list(ranges) == ["w"]
    assert ranges["w"].earliest == 110  # without arrivals (the range's early end)
    assert ranges["w"].expected is None or ranges["w"].expected > 110


def test_expected_durations_come_from_jobs_of_the_same_share_and_size_within_the_limit():
    durations = Durations()
    assert durations.expected("a", 1) == DEFAULT_DURATION_S
    for seconds in (10, 20, 30):
        durations.add("a", 1, seconds)
    durations.add("a", 4, 100)
    durations.add("b", 1, 7)
    assert durations.expected("a", 1) == 20
    assert durations.expected("a", 4) == 100
    assert durations.expected("a", 2) == 25  # the share's median
    assert durations.expected("c", 1) == 20  # the queue's median of 10, 20, 30, 100, 7
    assert durations.expected("a", 1, limit_s=600) == 20
    assert durations.expected("a", 1, limit_s=15) == 15  # the job is stopped at its limit
    assert durations.expected("c", 1, limit_s=600) == 600  # its share has no history
    assert durations.remaining("a", 1, elapsed_s=50) == 1  # over its usual time: ends soon


def test_estimates_are_exact_once_every_job_has_arrived_and_durations_are_regular():
    load = workload(
        {"gpu": 2},
        [Share("a", {"gpu": 2}, Strategy.LEND)],
        [job(f"j{i}", "a", 0, 10) for i in range(8)],
    )
    accuracy = estimate_accuracy(load.queues[0], probes=8)
    assert accuracy["estimates"] > 0
    assert accuracy["error_p90_s"] == 0


def test_a_scaled_workload_has_smaller_capacity_limits_and_jobs_that_still_fit():
    load = workload(
        {"gpu": 10},
        [Share("a", {"gpu": 4}, Strategy.LEND), Share("b", {"gpu": 1}, Strategy.LEND)],
        [job("big", "a", 0, 5, quantity=8)],
    )
    (queue,) = scaled(load, 0.5).queues
    assert queue.config.capacity == {"gpu": 5}
    assert {s.name: s.limits["gpu"] for s in queue.config.shares} == {"a": 2, "b": 1}
    assert queue.jobs[0].quantity == 5


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("uniform", [False, True])
def test_the_shortcuts_change_nothing_on_a_busy_fleet_either(seed, uniform):
    load = fleet(jobs=1200, shares=30, load=1.1, seed=seed, uniform_demand=uniform)
    fast = simulate(load, check=False, samples=0)
    full = simulate(load, check=False, fast=False, samples=0)
    assert fast.summary["preemptions"] > 0
    assert outcomes(fast) == outcomes(full)


def test_a_running_job_longer_than_its_kind_is_expected_to_run_on_at_the_ranges_ends():
    from scheduler.simulate.estimate import Durations

    durations = Durations()
    for seconds in (100, 110, 120, 500):
        durations.add("s", 1, seconds)
    assert durations.remaining("s", 1, 50) == 65  # the median (115) less the 50 s run
    # At the range's late end: of the jobs that ran past 150 s (only the 500 s one), its run
    # less what this one has run; past every one of them, 4 times what it has run.
    assert durations.remaining("s", 1, 150, q=0.9) == 350
    assert durations.remaining("s", 1, 600, q=0.9) == 2400
    assert durations.remaining("s", 1, 600, limit_s=700, q=0.9) == 100  # never past its limit


def test_the_jobs_to_come_repeat_the_last_stretch_of_arrivals():
    from scheduler.simulate.estimate import future_arrivals

    seen = [WorkJob(f"j{i}", "s", "u", 1 + i, 5 * i, 90.0 + 5 * i, 10.0) for i in range(3)]
    coming = future_arrivals(seen, now=100.0, horizon_s=25.0)  # seen at 90, 95, 100
    assert [job.submit_s for job in coming] == [100, 105, 110, 110, 115, 120, 120, 125]
    # At the range's late end each is as big as its share's biggest, as urgent as it came.
    assert {(job.priority, job.quantity) for job in coming} == {(0, 3), (5, 3), (10, 3)}
    typical = future_arrivals(seen, now=100.0, horizon_s=25.0, as_they_came=True)
    assert [job.submit_s for job in typical] == [job.submit_s for job in coming]
    assert {(job.priority, job.quantity) for job in typical} == {(0, 1), (5, 2), (10, 3)}


def test_the_expected_start_assumes_no_arrivals_once_they_have_paused():
    from scheduler.simulate.estimate import PAUSED_GAPS, future_arrivals

    seen = [WorkJob(f"j{i}", "s", "u", 1, 0, 90.0 + 5 * i, 10.0) for i in range(3)]
    quiet = 100.0 + PAUSED_GAPS * 5  # the last came at 100, every 5 s
    assert future_arrivals(seen, now=quiet - 1, horizon_s=60.0, as_they_came=True)
    assert not future_arrivals(seen, now=quiet + 1, horizon_s=60.0, as_they_came=True)
    assert future_arrivals(seen, now=quiet + 1, horizon_s=60.0), "the late end still does"
