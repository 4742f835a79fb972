#!/usr/bin/env python3
"""Kueue's scheduler-performance baseline through the whole control plane, against its
capacity bound (and against what the simulator predicts for the same tick).

    .venv/bin/python scripts/bench_replay.py [--tick 0.1] [--json]

Starts a Celery worker and beat (and gunicorn, unused here) on a fresh PostgreSQL database
`quotaportal_replay` (Redis database 11), then runs `manage.py replay kueue-baseline --setup
kb`: five SIMULATED queues of six shares, 15,000 jobs submitted at their times in batches per
instant. The production ticks run them: the beat, an immediate tick after each change, and a
tick at each instant a simulated job starts or ends. With --tick T every queue is also ticked
through Celery every T seconds (the simulator's fixed tick). Prints the replay's wall time
against the capacity bound (66 s) and the simulator's makespan for the same ticks (event by
event, or on the fixed tick); with --json the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stack  # noqa: E402 - scripts/ is not a package

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tick", type=float, help="also tick every queue on this period, in seconds"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, str(REPO))
    from scheduler.simulate import simulate
    from scheduler.simulate.loaders import kueue_baseline

    predicted = simulate(kueue_baseline(), tick_s=args.tick).summary
    bench = stack.Stack("quotaportal_replay", prefix="qp-replay-")
    try:
        bench.fresh_database()
        bench.start_services(worker_concurrency=2)
        grid = ["--tick", str(args.tick)] if args.tick else []
        done = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "replay",
                "kueue-baseline",
                "--setup",
                "kb",
                *grid,
                "--timeout",
                "900",
                "--json",
            ],
            cwd=REPO,
            env=bench.env,
            capture_output=True,
            text=True,
        )
    finally:
        bench.stop()
    if done.returncode or not done.stdout.strip():
        print(done.stdout, done.stderr, sep="\n")
        print(f"FAILED: the replay did not finish; logs in {bench.dir}")
        return 1
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["simulated_makespan_s"] = predicted["makespan_s"]
    figures["tick_s"] = args.tick
    ticked = f"ticks every {args.tick} s" if args.tick else "the production ticks"
    print(
        f"Kueue baseline shape, {figures['jobs']:,} jobs through PostgreSQL, Celery and "
        f"{ticked}: {figures['workload_s']} s against a capacity bound of "
        f"{figures['capacity_bound_s']} s ({figures['ratio']}x); the simulator predicts "
        f"{predicted['makespan_s']} s for these ticks; Kueue's published run: 351 s"
    )
    if args.json:
        print(json.dumps(figures))
    return 0 if not figures["unfinished"] else 1


if __name__ == "__main__":
    sys.exit(main())
