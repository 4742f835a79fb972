"""manage.py bench_dashboard — time the dashboard's live fragment on a large queue.

Seeds a synthetic queue (default 200 shares, 9,000 RUNNABLE + 1,000 dispatched jobs) inside a
transaction that is rolled back, ticks it once, then requests the HTMX fragment as a signed-in
user and prints the median time, bytes and SQL queries, and the same for a refresh that finds
nothing new (an empty 204). Every answer's status is checked before its time is printed.
"""

from __future__ import annotations

import json
import re
import statistics
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from quotaportal.benchmarks.management.commands.bench_tick import seed
from quotaportal.benchmarks.rolled_back import rolled_back
from quotaportal.tick.run import run_tick


class Command(BaseCommand):
    help = "Time the dashboard's live fragment at 200 shares and 10,000 jobs."

    def add_arguments(self, parser):
        parser.add_argument("--shares", type=int, default=200)
        parser.add_argument("--jobs", type=int, default=10_000)
        parser.add_argument("--repeat", type=int, default=7)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, shares, jobs, repeat, **options):

        def measure() -> dict:
            queue = seed(runnable=jobs * 9 // 10, dispatched=jobs // 10, shares=shares, units=5)
            run_tick(queue.id)
            return self.measure(queue.name, repeat)

        figures = rolled_back(measure)
        figures.update(shares=shares, jobs=jobs, vendor=connection.vendor)
        if options["json"]:
            self.stdout.write(json.dumps(figures))
        else:
            for key, value in figures.items():
                self.stdout.write(f"{key:>14}: {value}")

    def measure(self, queue_name: str, repeat: int) -> dict:
        user = get_user_model().objects.create(username=f"bench-{time.time_ns()}")
        client = Client()
        client.force_login(user)
        url = f"/?queue={queue_name}"
        self.fetch(client, url, {}, 200)  # warm caches and templates
        full, response = self.timed(client, url, {}, 200, repeat)
        # The version moves each minute: read it just before the refreshes that send it.
        version = re.search(r'data-version="(\w+)"', response.content.decode())[1]
        unchanged, nothing = self.timed(client, url, {"since": version}, 204, repeat)
        with CaptureQueriesContext(connection) as queries:
            self.fetch(client, url, {}, 200)
        with CaptureQueriesContext(connection) as unchanged_queries:
            self.fetch(client, url, {"since": version}, 204)
        return {
            "fragment_ms": full,
            "queries": len(queries),
            "bytes": len(response.content),
            "status": response.status_code,
            "unchanged_ms": unchanged,
            "unchanged_queries": len(unchanged_queries),
            "unchanged_bytes": len(nothing.content),
            "unchanged_status": nothing.status_code,
        }

    def timed(self, client, url, params, expected, repeat):
        timings = []
        for _ in range(repeat):
            start = time.perf_counter()
            response = self.fetch(client, url, params, expected)
            timings.append((time.perf_counter() - start) * 1000)
        return round(statistics.median(timings), 2), response

    @staticmethod
    def fetch(client, url, params, expected: int):
        """A timing is worth printing only for the answer it timed: anything else stops here."""
        response = client.get(url, params, HTTP_HX_REQUEST="true")
        if response.status_code != expected:
            raise CommandError(
                f"GET {url} {params} answered {response.status_code}, not {expected}: "
                f"{response.content[:200]!r}"
            )
        return response
