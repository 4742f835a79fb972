"""manage.py replay WORKLOAD [--queue Q | --setup NAME] [--tick SECONDS] [--speed X]

Submits a workload's jobs through the services at their submit times on SIMULATED
environments and, when every job has ended, prints the wall time against the workload's
capacity bound. WORKLOAD is a workload file or `kueue-baseline`.
"""

from __future__ import annotations

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections

from quotaportal.quotas.models import Backend, JobQueue, QuotaShare
from quotaportal.quotas.tasks import tick_queue
from quotaportal.tick.run import run_tick
from quotaportal.whatif.replays.stack import RealClock, latencies, replay, setup_queues
from scheduler.simulate.loaders import kueue_baseline
from scheduler.simulate.workload import WorkloadError, load_workload


class Command(BaseCommand):
    help = "Replay a workload through services, database and ticks; wall time vs the bound."

    def add_arguments(self, parser):
        parser.add_argument(
            "workload", metavar="WORKLOAD", help="a workload file or kueue-baseline"
        )
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument(
            "--queue", help="an existing SIMULATED queue with the workload's shares"
        )
        target.add_argument(
            "--setup", metavar="NAME", help="create SIMULATED environments and queues named NAME..."
        )
        parser.add_argument(
            "--tick",
            type=float,
            metavar="SECONDS",
            help="tick every queue on this period (through Celery when a broker is configured); "
            "default: leave it to the running beat and immediate ticks",
        )
        parser.add_argument("--speed", type=float, default=1.0, help="run this many times faster")
        parser.add_argument("--timeout", type=float, default=3600.0, help="give up after seconds")
        parser.add_argument("--json", action="store_true", help="end with one JSON line")

    def handle(self, *args, **options):
        if options["speed"] <= 0 or (options["tick"] is not None and options["tick"] <= 0):
            raise CommandError("--speed and --tick must be positive")
        workload = self._workload(options["workload"])
        queues = self._queues(workload, options)
        ticker = self._ticker(options["tick"]) if options["tick"] else None
        started = time.monotonic()
        result = replay(
            workload,
            queues,
            clock=RealClock(options["speed"]),
            tick_s=options["tick"],
            tick=ticker,
            progress=_Progress(self.stderr),
            timeout_s=options["timeout"],
        )
        wall = time.monotonic() - started
        summary = {
            "workload": workload.name,
            "jobs": workload.job_count,
            "unfinished": result.unfinished,
            "wall_s": round(wall, 3),
            "workload_s": round(result.wall_s, 3),
            "capacity_bound_s": round(result.capacity_bound_s, 3),
            "ratio": round(result.wall_s / result.capacity_bound_s, 3)
            if result.capacity_bound_s
            else None,
            "ticks_asked": result.ticks,
            **latencies(result),
        }
        self.stdout.write(
            f"{workload.job_count:,} jobs replayed in {summary['workload_s']} s of workload time "
            f"({summary['wall_s']} s wall) against a capacity bound of "
            f"{summary['capacity_bound_s']} s: {summary['ratio']}x"
            + (f"; {result.unfinished:,} had not ended at the timeout" if result.unfinished else "")
        )
        self.stdout.write(
            f"a job started {summary['start_after_dispatch_ms_p50']} ms (p50) after its dispatch "
            f"and ended {summary['end_after_duration_ms_mean']} ms (mean; p90 "
            f"{summary['end_after_duration_ms_p90']} ms) after its duration; "
            f"{summary['ticks_run']:,} ticks ran, {summary['tick_ms_mean']} ms each (mean)"
        )
        if options["json"]:
            self.stdout.write(json.dumps(summary))
        if result.unfinished:
            raise SystemExit(1)

    def _workload(self, source: str):
        if source == "kueue-baseline":
            return kueue_baseline()
        try:
            return load_workload(source)
        except WorkloadError as err:
            raise CommandError(str(err)) from None

    def _queues(self, workload, options) -> dict:
        if options["setup"]:
            name = options["setup"]
            taken = [
                q.config.name
                for q in workload.queues
                if JobQueue.objects.filter(
                    name=name if len(workload.queues) == 1 else f"{name}-{q.config.name}"
                ).exists()
            ]
            if taken:
                raise CommandError(f"queues for {name!r} exist already: pick another --setup name")
            return setup_queues(workload, name)
        if len(workload.queues) != 1:
            raise CommandError("this workload has several queues: use --setup NAME")
        queue = (
            JobQueue.objects.select_related("service_environment")
            .filter(name=options["queue"])
            .first()
        )
        if queue is None:
            raise CommandError(f"no job queue named {options['queue']!r}")
        if queue.service_environment.backend != Backend.SIMULATED:
            raise CommandError(f"queue {queue.name} is not on a SIMULATED environment")
        have = set(QuotaShare.objects.filter(job_queue=queue).values_list("name", flat=True))
        missing = sorted({j.share for j in workload.queues[0].jobs} - have)
        if missing:
            raise CommandError(f"queue {queue.name} has no share {', '.join(missing)}")
        return {workload.queues[0].config.name: queue}

    def _ticker(self, period: float):
        from django.conf import settings

        if settings.CELERY_TASK_ALWAYS_EAGER:
            return lambda queue, now: run_tick(queue.id)

        def through_celery(queue, now):
            close_old_connections()
            # A tick still waiting two periods on is superseded: drop it rather than pile up.
            tick_queue.apply_async((queue.id,), expires=max(0.5, 2 * period))

        return through_celery


class _Progress:
    def __init__(self, out):
        self.out = out
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= 5 or done == total:
            self.last = now
            self.out.write(f"  {done:,}/{total:,} jobs ended")
            sys.stderr.flush()
