"""manage.py bench_replay_ticks — what one tick costs at the Kueue shape's scale, in-process.

Replays --queues of the Kueue baseline shape's five queues (3,000 jobs each: six shares, jobs
of 0.2–10 s) on a virtual clock, ticking every --tick seconds of it in this process: no
broker, no worker, no other load, so the figure moves with the tick's own work and little
else. Prints the ticks run, their mean and median milliseconds, and the statements a tick
sends (the planned ones and the ones that found nothing changed apart); the submits' time is
left out. `scripts/bench_replay.py` runs the same shape through the whole stack in real time,
where the tick's cost is the latency between a job's end and the next start.

Its ticks commit, as in production (inside one transaction that is rolled back, every update
leaves a row version no tick can prune and the ticks slow down as they go): so it runs only
on a database with no job queues, which `scripts/bench_replay.py --in-process` makes for it
and drops afterwards.
"""

from __future__ import annotations

import json
import statistics
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from quotaportal.quotas.models import JobQueue
from quotaportal.tick.run import run_tick
from quotaportal.whatif.replays.stack import VirtualClock, replay, setup_queues
from scheduler.simulate import Workload
from scheduler.simulate.loaders import kueue_baseline


class _TickMeter:
    """Each tick's milliseconds and statements, and whether it planned."""

    def __init__(self):
        self.ms: list[float] = []
        self.statements: dict[bool, list[int]] = {True: [], False: []}
        self._counted = 0

    def _count(self, execute, sql, params, many, context):
        self._counted += 1
        return execute(sql, params, many, context)

    def tick(self, queue, now) -> None:
        self._counted = 0
        with connection.execute_wrapper(self._count):
            began = time.perf_counter()
            run = run_tick(queue.id, now=now)
            self.ms.append((time.perf_counter() - began) * 1000)
        self.statements[bool(run and run.replanned)].append(self._counted)


class Command(BaseCommand):
    help = "Ticks of the Kueue shape in one process on a virtual clock: ms and statements each."

    def add_arguments(self, parser):
        parser.add_argument("--queues", type=int, default=1, help="of the shape's five (1–5)")
        parser.add_argument("--tick", type=float, default=0.1, help="seconds of the virtual clock")
        parser.add_argument("--json", action="store_true", help="last line: one JSON object")

    def handle(self, *args, queues, tick, **options):
        if not 1 <= queues <= 5:
            raise CommandError("--queues must be between 1 and 5")
        if not 0.01 <= tick <= 10:
            raise CommandError("--tick must be between 0.01 and 10 seconds")
        if JobQueue.objects.exists():
            raise CommandError(
                "this database has job queues: run it on an empty one "
                "(scripts/bench_replay.py --in-process makes one and drops it)"
            )
        figures = self.measure(kueue_baseline(queues=queues), tick)
        self.stdout.write(
            f"{figures['ticks']:,} ticks of {figures['jobs']:,} jobs: {figures['tick_ms_mean']} ms "
            f"a tick (median {figures['tick_ms_p50']}); statements a tick: "
            f"{figures['statements_planned']} planning, {figures['statements_unchanged']} "
            f"finding nothing changed"
        )
        if options["json"]:
            self.stdout.write(json.dumps(figures))

    def measure(self, workload: Workload, tick_s: float) -> dict:
        queues = setup_queues(workload, "bench-ticks")  # the database has no other queues
        meter = _TickMeter()
        self.stderr.write(f"replaying {workload.job_count:,} jobs on a virtual clock ...")
        result = replay(workload, queues, clock=VirtualClock(), tick_s=tick_s, tick=meter.tick)
        if result.unfinished:
            raise CommandError(f"{result.unfinished} jobs had not ended: the replay is broken")
        return {
            "jobs": workload.job_count,
            "queues": len(queues),
            "ticks": len(meter.ms),
            "tick_ms_mean": round(statistics.fmean(meter.ms), 2),
            "tick_ms_p50": round(statistics.median(meter.ms), 2),
            "statements_planned": _mean(meter.statements[True]),
            "statements_unchanged": _mean(meter.statements[False]),
            "virtual_s": round(result.wall_s, 1),
        }


def _mean(counts: list[int]) -> float | None:
    return round(statistics.fmean(counts), 1) if counts else None
