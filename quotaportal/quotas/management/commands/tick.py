"""manage.py tick — one scheduler tick of every enabled job queue, now."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from quotaportal.quotas.models import JobQueue, State
from quotaportal.tick.run import run_tick


class Command(BaseCommand):
    help = "Run one scheduler tick of every enabled job queue and report what it did."

    def handle(self, *args, **options):
        queues = JobQueue.objects.filter(state=State.ENABLED).order_by("name")
        if not queues:
            self.stdout.write("no enabled job queues")
        for queue in queues:
            run = run_tick(queue.id)
            if run.skipped:
                self.stdout.write(f"{queue.name}: skipped, another tick holds the lock")
            elif run.error:
                self.stderr.write(f"{queue.name}: {run.error}")
            else:
                self.stdout.write(
                    f"{queue.name}: dispatched {run.dispatched}, preempted "
                    f"{run.preempted} in {run.duration_ms:.1f} ms"
                )
