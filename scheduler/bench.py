"""python -m scheduler.bench — how long one plan takes against the cost of one sort.

The synthetic queue is seeded, so the same arguments give the same snapshot. It is shaped
like a busy fleet: every unit nearly full, some shares borrowing and some idle, a mix of
strategies and gang sizes, and a backlog of RUNNABLE jobs far larger than what can start.

`sort_ms` times sorting the same runnable jobs by (share, -priority, created_at) in the same
process: the floor any planner pays to put jobs in order. `ratio` = plan_ms / sort_ms.
`explained_ms` is the same plan with every waiting job's reason and positions worked out (a
plan explains its jobs when first asked).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections import defaultdict

from scheduler.model import Job, Ordering, Share, Snapshot, Strategy
from scheduler.planner import plan_tick

DEFAULTS = {"runnable": 100_000, "dispatched": 10_000, "shares": 1_000, "units": 5}


def synthetic_snapshot(
    runnable: int,
    dispatched: int,
    shares: int,
    units: int,
    seed: int = 7,
    ordering: Ordering = Ordering.STRICT,
) -> Snapshot:
    rng = random.Random(seed)
    unit_names = [f"unit{i}" for i in range(units)]
    share_units = {
        f"share{i:04d}": rng.sample(unit_names, rng.randint(1, min(3, units)))
        for i in range(shares)
    }
    names = sorted(share_units)
    jobs: list[Job] = []
    used: dict[tuple[str, str], int] = defaultdict(int)
    for index in range(dispatched):
        name = rng.choice(names)
        unit = rng.choice(share_units[name])
        quantity = rng.randint(1, 4)
        used[name, unit] += quantity
        jobs.append(
            Job(
                f"d{index}",
                name,
                unit,
                quantity,
                rng.randint(0, 99),
                created_at=rng.uniform(0, 1000),
                dispatched_at=rng.uniform(1000, 2000),
            )
        )
    share_list = [_synthetic_share(rng, name, share_units[name], used) for name in names]
    for index in range(runnable):
        name = rng.choice(names)
        # One job in a hundred asks for a unit its share has no limit for.
        unit = rng.choice(unit_names if rng.random() < 0.01 else share_units[name])
        jobs.append(
            Job(
                f"r{index}",
                name,
                unit,
                rng.randint(1, 8),
                rng.randint(0, 99),
                created_at=rng.uniform(0, 3000),
            )
        )
    total: dict[str, int] = defaultdict(int)
    for (_, unit), count in used.items():
        total[unit] += count
    capacity = {unit: int(total[unit] * 1.02) + 8 for unit in unit_names}
    rng.shuffle(jobs)
    return Snapshot(capacity, tuple(share_list), tuple(jobs), ordering)


def _synthetic_share(rng: random.Random, name: str, units: list[str], used: dict) -> Share:
    strategy = rng.choice(list(Strategy))
    # Limits around current use: some shares borrow, some lend idle capacity.
    limits = {u: max(1, int(used[name, u] * rng.uniform(0.5, 1.5))) for u in units}
    borrow = rng.choice([-1, 50, 100, 200]) if strategy is Strategy.LEND_AND_BORROW else -1
    return Share(name, limits, strategy, borrow, rng.random() < 0.3, rng.random() < 0.95)


def _median_ms(fn, repeat: int) -> tuple[float, object]:
    """Median wall time of `fn`, with the cyclic GC paused during each run (as timeit does)."""
    timings, result = [], None
    for _ in range(repeat):
        result = None
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            result = fn()
            timings.append((time.perf_counter() - start) * 1000)
        finally:
            gc.enable()
    return statistics.median(timings), result


def measure(
    runnable: int,
    dispatched: int,
    shares: int,
    units: int,
    repeat: int = 5,
    seed: int = 7,
    ordering: Ordering = Ordering.STRICT,
) -> dict:
    snapshot = synthetic_snapshot(runnable, dispatched, shares, units, seed, ordering)
    waiting = [job for job in snapshot.jobs if job.dispatched_at is None]
    plan_ms, plan = _median_ms(lambda: plan_tick(snapshot, 5000.0), repeat)
    # The plan explains its waiting jobs when asked (scheduler.pending.Explanation): the
    # same plan with every job's reason and positions read.
    explained_ms, _ = _median_ms(lambda: len(plan_tick(snapshot, 5000.0).pending), repeat)
    sort_ms, _ = _median_ms(
        lambda: sorted(waiting, key=lambda j: (j.share, -j.priority, j.created_at)), repeat
    )
    return {
        "runnable": len(waiting),
        "dispatched": len(snapshot.jobs) - len(waiting),
        "shares": shares,
        "units": units,
        "plan_ms": round(plan_ms, 2),
        "sort_ms": round(sort_ms, 2),
        "ratio": round(plan_ms / sort_ms, 2),
        "explained_ms": round(explained_ms, 2),
        "started": len(plan.dispatches),
        "preempted": len(plan.preemptions),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for name, default in DEFAULTS.items():
        parser.add_argument(f"--{name}", type=int, default=default)
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing; the median counts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ordering", choices=[o.value for o in Ordering], default="STRICT")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--scaling", action="store_true", help="also time 1,000 / 10,000 / 100,000 runnable jobs"
    )
    args = parser.parse_args(argv)
    if min(args.runnable, args.dispatched) < 0 or min(args.shares, args.units, args.repeat) < 1:
        parser.error("sizes must be positive (runnable and dispatched may be 0)")
    sizes = [1_000, 10_000, 100_000] if args.scaling else [args.runnable]
    rows = []
    for runnable in sizes:
        if not args.json:
            print(f"planning {runnable:,} runnable jobs ...", file=sys.stderr, flush=True)
        rows.append(
            measure(
                runnable,
                args.dispatched,
                args.shares,
                args.units,
                args.repeat,
                args.seed,
                Ordering(args.ordering),
            )
        )
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else rows))
        return 0
    print(
        f"{'runnable':>9} {'dispatched':>10} {'shares':>6} {'units':>5} "
        f"{'plan_ms':>9} {'sort_ms':>9} {'ratio':>6} {'explained_ms':>12} "
        f"{'started':>7} {'preempted':>9}"
    )
    for r in rows:
        print(
            f"{r['runnable']:>9,} {r['dispatched']:>10,} {r['shares']:>6} {r['units']:>5} "
            f"{r['plan_ms']:>9.1f} {r['sort_ms']:>9.1f} {r['ratio']:>6.2f} "
            f"{r['explained_ms']:>12.1f} {r['started']:>7} {r['preempted']:>9}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
