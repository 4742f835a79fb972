"""How good are the start-time estimates? Replay a workload and, every so often during the
replay, ask for the estimates a user would have seen then; compare them with when the jobs
really started: the expected start's error, how often the likely range held the real start,
and how wide the ranges are beside the waits they predict."""

from __future__ import annotations

from dataclasses import replace

from scheduler.simulate.engine import QueueSimulation
from scheduler.simulate.estimate import (
    Durations,
    Estimate,
    Known,
    estimate_ranges,
    quantile_scenarios,
    scenarios_with_arrivals,
)
from scheduler.simulate.report import percentile, rounded
from scheduler.simulate.workload import QueueWorkload, WorkJob

Prediction = tuple[str, float, Estimate]  # job, asked at, estimate


def estimate_accuracy(queue: QueueWorkload, probes: int = 100) -> dict:
    """Replay the queue; at `probes` moments estimate every waiting job's start, with its
    range, from what was known then (durations of jobs finished so far), and compare with the
    real starts: the error of the expected start, and how often the real start fell inside
    the range (the calibration)."""
    # Every k-th instant of the replay (about two per job: its arrival and its end).
    every = max(1, 2 * len(queue.jobs) // probes)
    predictions: list[Prediction] = []
    durations = Durations()
    seen_ends: set[str] = set()

    def observe(sim: QueueSimulation) -> None:
        for job_id in [j for j in sim.outcomes if j not in seen_ends]:
            outcome = sim.outcomes[job_id]
            if outcome.end_s is not None:
                seen_ends.add(job_id)
                durations.add(outcome.job.share, outcome.job.quantity, outcome.job.duration_s)
        if not sim.run.instants % every and sim.runnable:
            predictions.extend(_predictions(queue, sim, durations))

    run = QueueSimulation(queue, check=False, observer=observe).simulate()
    last_arrival = max((job.submit_s for job in queue.jobs), default=0.0)
    return _score(predictions, run, last_arrival)


def _predictions(
    queue: QueueWorkload, sim: QueueSimulation, durations: Durations
) -> list[Prediction]:
    """What a user would have been told at this moment of the replay."""
    known = [
        Known(sim.work[job.id], job.dispatched_at, sim.now - job.dispatched_at)
        for job in sim.dispatched.values()
    ] + [Known(sim.work[job_id]) for job_id in sim.runnable]
    seen = [job for job in queue.jobs if job.submit_s <= sim.now]
    scenarios = scenarios_with_arrivals(
        queue.config,
        quantile_scenarios(known, durations),
        [_expected(j, durations) for j in seen],
        sim.now,
    )
    ranges = estimate_ranges(queue.config, scenarios, sim.now)
    return [(job_id, sim.now, estimate) for job_id, estimate in ranges.items()]


def _score(predictions: list[Prediction], run, last_arrival: float) -> dict:
    started = {job_id: outcome.start_s for job_id, outcome in run.outcomes.items()}
    everything = _errors(predictions, started)
    settled = _errors(predictions, started, after=last_arrival)
    waits = sorted(o.wait_s for o in run.outcomes.values() if o.wait_s is not None)
    return {
        "estimates": len(predictions),
        "without_estimate": sum(1 for _, _, e in predictions if e.expected is None),
        "error_p50_s": rounded(percentile(everything, 0.5)),
        "error_p90_s": rounded(percentile(everything, 0.9)),
        # The share of estimates whose range held the real start (target: at least 0.8).
        "inside_range": _inside(predictions, started),
        "uncertain": sum(1 for _, asked, e in predictions if e.uncertain(asked)),
        # Once every job has arrived, no later job can jump ahead: what durations alone cost.
        "estimates_after_last_arrival": len(settled),
        "error_after_last_arrival_p50_s": rounded(percentile(settled, 0.5)),
        "error_after_last_arrival_p90_s": rounded(percentile(settled, 0.9)),
        "inside_range_after_last_arrival": _inside(predictions, started, after=last_arrival),
        "wait_p50_s": rounded(percentile(waits, 0.5)),
        # How narrow the ranges are, beside the waits they bracket (target: at most 2x).
        "range_width_p50_s": rounded(percentile(_widths(predictions), 0.5)),
        "expected_wait_p50_s": rounded(percentile(_expected_waits(predictions), 0.5)),
    }


def _widths(predictions) -> list[float]:
    return sorted(
        e.latest - e.earliest
        for _, _, e in predictions
        if e.latest is not None and e.earliest is not None
    )


def _expected_waits(predictions) -> list[float]:
    return sorted(
        max(e.expected - asked, 0.0) for _, asked, e in predictions if e.expected is not None
    )


def _errors(predictions, started: dict, after: float = float("-inf")) -> list[float]:
    return sorted(
        abs(estimate.expected - started[job_id])
        for job_id, asked, estimate in predictions
        if asked > after and estimate.expected is not None and started[job_id] is not None
    )


def _inside(predictions, started: dict, after: float = float("-inf")) -> float | None:
    """The share of the estimates (asked after `after`) whose range held the real start."""
    judged = [
        (estimate, started[job_id])
        for job_id, asked, estimate in predictions
        if asked > after and started[job_id] is not None
    ]
    hits = sum(
        1
        for estimate, at in judged
        if estimate.earliest is not None
        and estimate.earliest - 1.0 <= at <= (estimate.latest or float("inf")) + 1.0
    )
    return round(hits / len(judged), 3) if judged else None


def _expected(job: WorkJob, durations: Durations, q: float = 0.5) -> WorkJob:
    return replace(job, duration_s=durations.expected(job.share, job.quantity, q=q))
