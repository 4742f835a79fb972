"""manage.py usage_backfill — build the hourly usage rows from the attempts on record.

Idempotent: each hour's rows are replaced whole, so it may run again (or alongside beat's
roll-ups) without counting anything twice."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from quotaportal.usage import reports, rollup


class Command(BaseCommand):
    help = "Build the hourly usage rows from every attempt on record (or from --since)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--since", help="ISO 8601 time to start from (default: the first attempt)"
        )

    def handle(self, *args, since=None, **options):
        start = None
        if since:
            try:
                start = reports.parse_time(since, "since")
            except ValueError as error:
                raise CommandError(error.args[0]["since"]) from None
        began = time.perf_counter()

        def progress(done, until) -> None:
            self.stdout.write(f"  rolled up to {done:%Y-%m-%d %H:%M} of {until:%Y-%m-%d %H:%M}")

        rows = rollup.roll_up(since=start, progress=progress)
        seconds = time.perf_counter() - began
        self.stdout.write(f"usage rows written: {rows} in {seconds:.1f} s")
