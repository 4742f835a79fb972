"""When will a waiting job start? Simulate the queue forward from now.

Running jobs end after their expected remaining time and waiting jobs run for their expected
duration; the forward simulation stops once every waiting job has started. The estimate is
only as good as the durations: `estimate_accuracy` measures it on a replayed workload by
asking, every so often during the replay, for the estimates a user would have seen then, and
comparing them with when the jobs really started.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from scheduler.simulate.engine import QueueSimulation
from scheduler.simulate.engine_state import Running
from scheduler.simulate.report import percentile, rounded
from scheduler.simulate.workload import QueueConfig, QueueWorkload, WorkJob

DEFAULT_DURATION_S = 3600.0  # a job of a share with no finished job yet is assumed to take this
MIN_REMAINING_S = 1.0  # a job running longer than usual is assumed to end soon, not now
ASSUMPTION = "if jobs run as long as their share's recent jobs of the same size"


def estimate_starts(
    config: QueueConfig,
    running: Iterable[Running],
    waiting: Iterable[WorkJob],
    now: float,
    max_instants: int = 20_000,
) -> dict[str, float | None]:
    """Estimated start (seconds, same clock as `now`) of each waiting job; None when it does
    not start within `max_instants` events."""
    waiting = tuple(waiting)
    simulation = QueueSimulation(
        QueueWorkload(config, waiting),
        running=list(running),
        start_s=now,
        check=False,
        until_all_started=True,
        max_instants=max_instants,
    )
    outcomes = simulation.simulate().outcomes
    return {job.id: outcomes[job.id].start_s for job in waiting}


class Durations:
    """Expected run time of a job: the median of the recent finished jobs of its share and
    size, else of its share (either no longer than the job's time limit); else its time
    limit; else the median of the queue's recent jobs; else DEFAULT_DURATION_S."""

    def __init__(self, keep: int = 50):
        self.keep = keep
        self.recent: dict[tuple, list[float]] = defaultdict(list)  # (share, size) and (share,)

    def add(self, share: str, quantity: int, seconds: float) -> None:
        for key in ((share, quantity), (share,), ()):
            values = self.recent[key]
            values.append(seconds)
            if len(values) > self.keep:
                del values[0]

    def expected(self, share: str, quantity: int, limit_s: float | None = None) -> float:
        for key in ((share, quantity), (share,)):
            if self.recent.get(key):
                usual = statistics.median(self.recent[key])
                return min(usual, limit_s) if limit_s else usual
        if limit_s:
            return float(limit_s)
        if self.recent.get(()):
            return statistics.median(self.recent[()])
        return DEFAULT_DURATION_S

    def remaining(
        self, share: str, quantity: int, elapsed_s: float, limit_s: float | None = None
    ) -> float:
        return max(MIN_REMAINING_S, self.expected(share, quantity, limit_s) - elapsed_s)


def estimate_accuracy(queue: QueueWorkload, probes: int = 100) -> dict:
    """Replay the queue; at `probes` moments estimate every waiting job's start from what was
    known then (durations of jobs finished so far), and compare with the real starts."""
    # Every k-th instant of the replay (about two per job: its arrival and its end).
    every = max(1, 2 * len(queue.jobs) // probes)
    last_arrival = max((job.submit_s for job in queue.jobs), default=0.0)
    predictions: list[tuple[str, float, float | None]] = []  # job, asked at, estimate
    durations = Durations()
    seen_ends: set[str] = set()

    def observe(sim: QueueSimulation) -> None:
        for job_id in [j for j in sim.outcomes if j not in seen_ends]:
            outcome = sim.outcomes[job_id]
            if outcome.end_s is not None:
                seen_ends.add(job_id)
                durations.add(outcome.job.share, outcome.job.quantity, outcome.job.duration_s)
        if sim.run.instants % every or not sim.runnable:
            return
        running = [
            Running(
                _expected(sim.work[job.id], durations),
                job.dispatched_at,
                durations.remaining(job.share, job.quantity, sim.now - job.dispatched_at),
            )
            for job in sim.dispatched.values()
        ]
        waiting = [_expected(sim.work[job_id], durations) for job_id in sim.runnable]
        for job_id, at in estimate_starts(queue.config, running, waiting, sim.now).items():
            predictions.append((job_id, sim.now, at))

    run = QueueSimulation(queue, check=False, observer=observe).simulate()

    def errors(after: float = float("-inf")) -> list[float]:
        return sorted(
            abs(at - run.outcomes[job_id].start_s)
            for job_id, asked, at in predictions
            if asked > after and at is not None and run.outcomes[job_id].start_s is not None
        )

    everything, settled = errors(), errors(after=last_arrival)
    return {
        "estimates": len(predictions),
        "without_estimate": sum(1 for _, _, at in predictions if at is None),
        "error_p50_s": rounded(percentile(everything, 0.5)),
        "error_p90_s": rounded(percentile(everything, 0.9)),
        # Once every job has arrived, no later job can jump ahead: what durations alone cost.
        "estimates_after_last_arrival": len(settled),
        "error_after_last_arrival_p50_s": rounded(percentile(settled, 0.5)),
        "error_after_last_arrival_p90_s": rounded(percentile(settled, 0.9)),
        "wait_p50_s": rounded(
            percentile(sorted(o.wait_s for o in run.outcomes.values() if o.wait_s is not None), 0.5)
        ),
    }


def _expected(job: WorkJob, durations: Durations) -> WorkJob:
    return replace(job, duration_s=durations.expected(job.share, job.quantity))
