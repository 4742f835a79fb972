"""Figures from simulated runs: waits, makespan against the capacity bound, preemptions,
borrowed and idle instance-hours, utilization per share over time."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from scheduler.fairshare import jain_index
from scheduler.model import Strategy
from scheduler.simulate.engine_state import QueueRun
from scheduler.simulate.workload import QueueWorkload, capacity_bound_s
from scheduler.utilization import share_breakdown


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None for none)."""
    if not values:
        return None
    rank = max(1, math.ceil(fraction * len(values)))
    return values[rank - 1]


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def utilization_series(run: QueueRun) -> list[dict]:
    """The samples as {t, shares: {share: {own, borrowed, lent, idle}}} summed over units."""
    series = []
    for at, used, capacity in run.samples:
        per_share = {}
        for share, units in share_breakdown(run.shares, used, capacity).items():
            totals: dict[str, int] = defaultdict(int)
            for parts in units.values():
                totals["own"] += min(parts["used"], parts["limit"])
                for part in ("borrowed", "lent", "idle"):
                    totals[part] += parts[part]
            per_share[share] = dict(totals)
        series.append({"t": round(at - run.first_submit_s, 3), "shares": per_share})
    return series


def queue_summary(queue: QueueWorkload, run: QueueRun) -> dict:
    outcomes = run.outcomes.values()
    ends = [o.end_s for o in outcomes if o.end_s is not None]
    waits = sorted(o.wait_s for o in outcomes if o.wait_s is not None)
    per_share: dict[str, dict] = {}
    by_share: dict[str, list[float]] = defaultdict(list)
    preempted_by_share: dict[str, int] = defaultdict(int)
    jobs_by_share: dict[str, int] = defaultdict(int)
    for outcome in outcomes:
        jobs_by_share[outcome.job.share] += 1
        preempted_by_share[outcome.job.share] += len(outcome.preemptions)
        if outcome.wait_s is not None:
            by_share[outcome.job.share].append(outcome.wait_s)
    for share in run.shares:
        share_waits = sorted(by_share.get(share.name, []))
        per_share[share.name] = {
            "jobs": jobs_by_share.get(share.name, 0),
            "started": len(share_waits),
            "wait_p50_s": rounded(percentile(share_waits, 0.5)),
            "wait_p90_s": rounded(percentile(share_waits, 0.9)),
            "wait_p99_s": rounded(percentile(share_waits, 0.99)),
            "own_hours": round(run.own_s.get(share.name, 0.0) / 3600, 4),
            "borrowed_hours": round(run.borrowed_s.get(share.name, 0.0) / 3600, 4),
            "preemptions": preempted_by_share.get(share.name, 0),
        }
    return {
        "queue": run.name,
        "jobs": len(queue.jobs),
        "finished": len(ends),
        "never_started": sum(1 for o in outcomes if o.start_s is None),
        "makespan_s": rounded(max(ends) - run.first_submit_s if ends else 0.0),
        "capacity_bound_s": rounded(capacity_bound_s(queue)),
        "wait_p50_s": rounded(percentile(waits, 0.5)),
        "wait_p90_s": rounded(percentile(waits, 0.9)),
        "wait_p99_s": rounded(percentile(waits, 0.99)),
        "preemptions": sum(run.preemptions.values()),
        "preemptions_by_kind": dict(sorted(run.preemptions.items())),
        "borrowed_instance_hours": round(sum(run.borrowed_s.values()) / 3600, 4),
        "idle_instance_hours_while_waiting": round(run.idle_while_waiting_s / 3600, 4),
        "borrowed_hours_jain": rounded(borrowed_jain(run, per_share), 4),
        "ticks_planned": run.ticks_planned,
        "ticks_skipped": run.ticks_skipped,
        "instants": run.instants,
        "wall_s": round(run.wall_s, 3),
        "shares": per_share,
    }


def borrowed_jain(run: QueueRun, per_share: dict[str, dict]) -> float | None:
    """Jain's fairness index of the borrowed hours (per weight, under a fair-share policy) of
    the shares that may borrow and had jobs: 1 when they borrowed alike; None with fewer
    than two such shares."""
    weight = run.fair_share.weight if run.fair_share else (lambda _: 1.0)
    borrowed = [
        per_share[share.name]["borrowed_hours"] / weight(share.name)
        for share in run.shares
        if share.strategy is Strategy.LEND_AND_BORROW and per_share[share.name]["jobs"]
    ]
    return jain_index(borrowed) if len(borrowed) >= 2 else None


def combined_summary(summaries: list[dict], wall_s: float) -> dict:
    """One line for a workload of several queues: the slowest queue and all jobs' waits."""
    kinds: dict[str, int] = defaultdict(int)
    for summary in summaries:
        for kind, count in summary["preemptions_by_kind"].items():
            kinds[kind] += count
    return {
        "jobs": sum(s["jobs"] for s in summaries),
        "finished": sum(s["finished"] for s in summaries),
        "never_started": sum(s["never_started"] for s in summaries),
        "makespan_s": max((s["makespan_s"] for s in summaries), default=0.0),
        "capacity_bound_s": max((s["capacity_bound_s"] for s in summaries), default=0.0),
        "preemptions": sum(kinds.values()),
        "preemptions_by_kind": dict(sorted(kinds.items())),
        "borrowed_instance_hours": round(sum(s["borrowed_instance_hours"] for s in summaries), 4),
        "idle_instance_hours_while_waiting": round(
            sum(s["idle_instance_hours_while_waiting"] for s in summaries), 4
        ),
        "ticks_planned": sum(s["ticks_planned"] for s in summaries),
        "ticks_skipped": sum(s["ticks_skipped"] for s in summaries),
        "wall_s": round(wall_s, 3),
    }


def all_waits(runs: Iterable[QueueRun]) -> list[float]:
    return sorted(o.wait_s for run in runs for o in run.outcomes.values() if o.wait_s is not None)
