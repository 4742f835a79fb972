"""manage.py bench_suggestion — does "Suggest limits" help? Measured on a recorded workload.

Records a workload through the whole stack (services, database, ticks on a virtual clock)
over the last --hours on a queue whose terms fit its demand badly: `prod` RESERVEs 8 of 16
GPUs and runs a few jobs; `research` (LEND, limit 4) submits far more than 4 GPUs' worth;
`batch` (LEND_AND_BORROW, limit 4) borrows. Then rolls the usage up, prints the quota
review's flags and the suggestion, and replays the recorded jobs on today's terms and on the
suggestion (the what-if the page opens), printing waits before and after. Everything is
rolled back afterwards.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from quotaportal.benchmarks.rolled_back import rolled_back
from quotaportal.quotas.models import WhatIf
from quotaportal.usage import reports, review, rollup
from quotaportal.whatif import runs as whatif
from quotaportal.whatif.replays.stack import VirtualClock, replay, setup_queues
from scheduler import Share, Strategy
from scheduler.simulate import QueueConfig, QueueWorkload, WorkJob, Workload

TICK_S = 15.0


def recorded_shape(hours: int) -> Workload:
    """Demand that the terms fit badly (see the module's docstring)."""
    seconds = hours * 3600
    shares = (
        Share("prod", {"gpu": 8}, Strategy.RESERVE),
        Share("research", {"gpu": 4}, Strategy.LEND),
        Share("batch", {"gpu": 4}, Strategy.LEND_AND_BORROW),
    )
    jobs = []
    classes = (  # share, GPUs, minutes running, one every so many minutes
        ("prod", 4, 20, 60),
        ("research", 1, 20, 2),
        ("batch", 2, 30, 10),
    )
    for share, gpus, minutes, every in classes:
        for i in range(int(seconds // (every * 60))):
            jobs.append(
                WorkJob(f"{share}-{i}", share, "gpu", gpus, 0, i * every * 60.0, minutes * 60.0)
            )
    jobs.sort(key=lambda j: (j.submit_s, j.id))
    config = QueueConfig("review", {"gpu": 16}, shares)
    return Workload("review-shape", (QueueWorkload(config, tuple(jobs)),), ())


class Command(BaseCommand):
    help = "Record a badly fitted workload, suggest limits, replay before and after (rolled back)."

    def add_arguments(self, parser):
        parser.add_argument("--hours", type=int, default=6, help="hours of workload to record")

    def handle(self, *args, hours, **options):
        if not 1 <= hours <= 24:
            raise CommandError("--hours must be between 1 and 24")
        figures = rolled_back(lambda: self.measure(hours))
        self.stdout.write(json.dumps(figures, indent=2))

    def measure(self, hours: int) -> dict:
        workload = recorded_shape(hours)
        end = rollup.floor_hour(timezone.now())
        origin = end - timedelta(hours=hours + 1)
        queue = setup_queues(workload, f"review-{origin:%H%M%S}")["review"]
        self.stdout.write(f"recording {workload.job_count} jobs over {hours} h ...")
        recorded = replay(
            workload,
            {"review": queue},
            clock=VirtualClock(origin),
            tick_s=TICK_S,
            timeout_s=7 * 24 * 3600.0,  # virtual time: the backlog drains long after `end`
        )
        if recorded.unfinished:
            raise CommandError(f"{recorded.unfinished} jobs did not finish in the recording")
        rollup.roll_up(since=origin)
        report = reports.usage_report(origin, end, "share", reports.Scope(job_queue=queue.name))
        strategies = {s.name: s.strategy.value for s in workload.queues[0].config.shares}
        flagged = {
            row["quota_share"]: review.flags(row, strategies[row["quota_share"]])
            for row in report["rows"]
        }
        draft, reasons = review.suggested_draft(queue, origin, end)
        self.stdout.write("replaying today's terms and the suggestion ...")
        run = review.suggest(None, queue, origin, end)
        whatif.run_what_if(str(run.pk))
        result = WhatIf.objects.get(pk=run.pk).result
        return {
            "jobs": workload.job_count,
            "recorded": {
                row["quota_share"]: {
                    "wait_p50_s": row["wait_p50_s"],
                    "wait_p90_s": row["wait_p90_s"],
                    "waited_beside_idle_instance_hours": round(
                        row["waited_beside_idle_instance_seconds"] / 3600, 1
                    ),
                }
                for row in report["rows"]
            },
            "flags": flagged,
            "suggestion": reasons,
            "today": _waits(result["today"]),
            "suggested": _waits(result["draft"]),
        }


def _waits(summary: dict) -> dict:
    return {
        "jobs": summary["jobs"],
        "never_started": summary["never_started"],
        "wait_p50_s": summary["wait_p50_s"],
        "wait_p90_s": summary["wait_p90_s"],
        "preemptions": summary["preemptions"],
        "shares": {
            name: {"jobs": s["jobs"], "wait_p50_s": s["wait_p50_s"], "wait_p90_s": s["wait_p90_s"]}
            for name, s in summary["shares"].items()
        },
    }
