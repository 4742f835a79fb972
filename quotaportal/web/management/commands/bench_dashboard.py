"""manage.py bench_dashboard — time the dashboard's live fragment on a large queue.

Seeds a synthetic queue (default 200 shares, 9,000 RUNNABLE + 1,000 dispatched jobs) inside a
transaction that is rolled back, ticks it once, then requests the HTMX fragment as a signed-in
user and prints the median time and the number of SQL queries.
"""

from __future__ import annotations

import json
import statistics
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

from quotaportal.quotas import services
from quotaportal.quotas.management.commands.bench_tick import seed


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Time the dashboard's live fragment at 200 shares and 10,000 jobs."

    def add_arguments(self, parser):
        parser.add_argument("--shares", type=int, default=200)
        parser.add_argument("--jobs", type=int, default=10_000)
        parser.add_argument("--repeat", type=int, default=7)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, shares, jobs, repeat, **options):
        figures = {}
        try:
            with transaction.atomic():
                queue = seed(runnable=jobs * 9 // 10, dispatched=jobs // 10, shares=shares, units=5)
                services.run_tick(queue.id)
                figures = self.measure(queue.name, repeat)
                raise _Rollback
        except _Rollback:
            pass
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
        client.get(url, HTTP_HX_REQUEST="true")  # warm caches and templates
        timings = []
        for _ in range(repeat):
            start = time.perf_counter()
            response = client.get(url, HTTP_HX_REQUEST="true")
            timings.append((time.perf_counter() - start) * 1000)
        with CaptureQueriesContext(connection) as queries:
            client.get(url, HTTP_HX_REQUEST="true")
        return {
            "fragment_ms": round(statistics.median(timings), 2),
            "queries": len(queries),
            "bytes": len(response.content),
            "status": response.status_code,
        }
