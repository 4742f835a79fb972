"""manage.py run_scenario FILE... — play scenario files through services, database and tick."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from quotaportal.whatif.replays.scenario_world import DbWorld
from scheduler.scenarios.cli import run_files


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Play scenario files through services, database and tick (output as the pure runner)."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument(
            "--keep",
            action="store_true",
            help="keep the scenario's queues and jobs in the database afterwards",
        )

    def handle(self, *args, files, keep, **options):

        settings.QP_IMMEDIATE_TICKS = False  # the scenario decides when ticks happen
        status = 0
        try:
            with transaction.atomic():
                status = run_files(files, DbWorld, self.stdout.write)
                if not keep:
                    raise _Rollback
        except _Rollback:
            pass
        if status:
            raise SystemExit(status)
