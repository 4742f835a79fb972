"""manage.py export_workload QUEUE --since 7d [--output FILE] — a queue's history as a
simulator workload (python -m scheduler.simulate --workload FILE)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from quotaportal.quotas.models import JobQueue
from quotaportal.whatif.replays.history import parse_duration, queue_history
from scheduler.simulate.workload import workload_to_json


class Command(BaseCommand):
    help = "Write the jobs a queue ran recently as a workload file for the simulator."

    def add_arguments(self, parser):
        parser.add_argument("queue", metavar="QUEUE", help="job queue name")
        parser.add_argument("--since", default="7d", help="how far back: 90s, 30m, 12h, 7d")
        parser.add_argument("--output", metavar="FILE", help="write here instead of stdout")

    def handle(self, *args, queue, since, output, **options):
        try:
            span = parse_duration(since)
        except ValueError as err:
            raise CommandError(f"--since: {err}") from None
        target = JobQueue.objects.filter(name=queue).first()
        if target is None:
            names = ", ".join(JobQueue.objects.order_by("name").values_list("name", flat=True))
            raise CommandError(f"no job queue named {queue!r} (queues: {names or 'none'})")
        workload = queue_history(target, span)
        text = json.dumps(workload_to_json(workload), indent=1)
        if output:
            with open(output, "w") as handle:
                handle.write(text + "\n")
            for note in workload.notes:
                self.stderr.write(note)
            self.stderr.write(f"wrote {workload.job_count:,} jobs to {output}")
        else:
            self.stdout.write(text)
