"""manage.py aws_sync_check: what a sync of an AWS_BATCH environment would push and pull."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from quotaportal.awsbatch.sync.backend import sync_queue
from quotaportal.quotas.models import Backend, ServiceEnvironment


class Command(BaseCommand):
    help = (
        "Print what a sync of an AWS_BATCH service environment would push to AWS Batch and "
        "pull back, changing nothing: only read calls are sent, and the database is rolled "
        "back. Exits 1 when AWS cannot be read."
    )

    def add_arguments(self, parser):
        parser.add_argument("environment", help="the service environment's name")

    def handle(self, *args, environment, **options):
        env = ServiceEnvironment.objects.filter(name=environment).first()
        if env is None:
            raise CommandError(f"no service environment named {environment!r}")
        if env.backend != Backend.AWS_BATCH:
            raise CommandError(f"{environment} is a {env.backend} environment, not AWS_BATCH")
        failed = False
        for queue in env.job_queues.select_related("service_environment").order_by("name"):
            with transaction.atomic():
                sync = sync_queue(queue, timezone.now(), dry_run=True)
                transaction.set_rollback(True)
            failed |= self._print(queue.name, sync)
        if failed:
            raise CommandError("AWS Batch could not be read completely; see the errors above")

    def _print(self, name: str, sync) -> bool:
        self.stdout.write(f"job queue {name}:")
        pushes = [line[len("push: ") :] for line in sync.report if line.startswith("push: ")]
        pulls = [line[len("pull: ") :] for line in sync.report if line.startswith("pull: ")]
        other = [line for line in sync.report if not line.startswith(("push: ", "pull: "))]
        for line in pushes or ["nothing to push"]:
            self.stdout.write(f"  would push: {line}" if pushes else f"  {line}")
        for line in pulls or ["nothing to pull"]:
            self.stdout.write(f"  would pull: {line}" if pulls else f"  {line}")
        for line in other:
            self.stdout.write(f"  {line}")
        self.stdout.write(
            f"  ({sync.caller.calls} read calls made, {len(sync.caller.writes)} not sent)"
        )
        return any(line.startswith("error: ") for line in other)
