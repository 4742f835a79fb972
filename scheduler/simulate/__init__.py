"""A deterministic discrete-event simulator of job queues through `plan_tick`.

    result = simulate(workload)             # event to event
    result = simulate(workload, tick_s=2)   # on a fixed tick, like the live system
    result.summary["wait_p99_s"], result.runs[0].outcomes["job-1"].start_s

Standard library only, like the rest of `scheduler/`. The command line is
`python -m scheduler.simulate`; see its --help.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.simulate.engine import QueueSimulation
from scheduler.simulate.engine_state import JobOutcome, QueueRun, Running, SkipWasWrong
from scheduler.simulate.report import (
    all_waits,
    combined_summary,
    percentile,
    queue_summary,
    rounded,
    utilization_series,
)
from scheduler.simulate.workload import (
    QueueConfig,
    QueueWorkload,
    WorkJob,
    Workload,
    WorkloadError,
    capacity_bound_s,
)

SAMPLES = 150  # utilization samples per queue over its capacity bound


@dataclass
class Result:
    workload: Workload
    runs: list[QueueRun]
    queue_summaries: list[dict]
    summary: dict

    def outcome(self, job_id: str) -> JobOutcome:
        for run in self.runs:
            if job_id in run.outcomes:
                return run.outcomes[job_id]
        raise KeyError(job_id)


def simulate(
    workload: Workload,
    *,
    tick_s: float | None = None,
    check: bool = True,
    fast: bool = True,
    verify_skips: bool = False,
    progress: Callable[[int, int], None] | None = None,
    samples: int = SAMPLES,
) -> Result:
    """Replay every queue of the workload; `progress(done, total)` is called as jobs finish."""
    began = time.perf_counter()
    total = workload.job_count
    runs, summaries = [], []
    done_before = 0
    for queue in workload.queues:
        bound = max(capacity_bound_s(queue), 1e-3)
        report = None
        if progress:
            offset = done_before

            def report(done: int, _total: int, offset=offset) -> None:
                progress(offset + done, total)

        run = QueueSimulation(
            queue,
            tick_s=tick_s,
            check=check,
            fast=fast,
            verify_skips=verify_skips,
            progress=report,
            sample_every_s=bound / samples if samples else None,
        ).simulate()
        done_before += len(queue.jobs)
        runs.append(run)
        summaries.append(queue_summary(queue, run))
    summary = combined_summary(summaries, time.perf_counter() - began)
    waits = all_waits(runs)
    for name, fraction in (("wait_p50_s", 0.5), ("wait_p90_s", 0.9), ("wait_p99_s", 0.99)):
        summary[name] = rounded(percentile(waits, fraction))
    if progress:
        progress(total, total)
    return Result(workload, runs, summaries, summary)


__all__ = [
    "JobOutcome",
    "QueueConfig",
    "QueueRun",
    "QueueWorkload",
    "Result",
    "Running",
    "SkipWasWrong",
    "WorkJob",
    "Workload",
    "WorkloadError",
    "capacity_bound_s",
    "simulate",
    "utilization_series",
]
