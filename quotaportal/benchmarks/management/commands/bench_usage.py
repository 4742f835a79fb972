"""manage.py bench_usage — how fast a usage report answers over many attempts.

Seeds --attempts finished attempts (one per job, 5 % preempted) spread over --days on one
queue of 10 teams' shares and 100 users, straight into PostgreSQL; builds the hourly rows as
usage_backfill does (timed); then times 90-day reports grouped each way (median of --repeat).
Everything runs in a transaction that is rolled back, so the database is left as it was.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone

from quotaportal.benchmarks.rolled_back import median_ms, rolled_back
from quotaportal.jobs.transitions import PREEMPTION_REASONS
from quotaportal.quotas.models import (
    CapacityUnit,
    EnvironmentCapacity,
    JobQueue,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
    ShareCapacityLimit,
    Team,
)
from quotaportal.usage import reports, rollup
from scheduler import PreemptionKind

TEAMS, USERS = 10, 100

JOBS_SQL = """
    INSERT INTO quotas_job (id, name, share_name, quantity, scheduling_priority, status,
        status_reason, pending_reason, command, retry_attempts, evaluate_on_exit,
        request_fingerprint, tags, created_at, stopped_at, attempt_count, preempted_count,
        recent_preemptions, is_terminated, capacity_unit_id, submitted_by_id, job_queue_id,
        quota_share_id, estimate_uncertain)
    SELECT gen_random_uuid(), 'bench-' || i, 'share' || (i %% 10), 1 + (i %% 4), i %% 3,
        'SUCCEEDED', '', '', '', 1, '[]', '', '{}',
        %(start)s + make_interval(secs => i * %(spacing)s), NULL, 1, 0, '[]', false,
        %(unit)s, (%(users)s::int[])[1 + (i %% 100)], %(queue)s,
        (%(shares)s::bigint[])[1 + (i %% 10)], false
    FROM generate_series(1, %(n)s) AS i
"""
ATTEMPTS_SQL = """
    INSERT INTO quotas_jobattempt (job_id, number, started_at, stopped_at, status_reason,
        preempted)
    SELECT id, 1, created_at + make_interval(secs => (hashtext(name) & 1023)),
        created_at + make_interval(secs => 1024 + (hashtext(name) & 4095) * 1.5),
        CASE WHEN hashtext(name) %% 20 = 0
            THEN %(preempted)s ELSE 'Job completed' END,
        hashtext(name) %% 20 = 0
    FROM quotas_job WHERE job_queue_id = %(queue)s
"""


class Command(BaseCommand):
    help = "Time usage reports over many attempts (rolled back afterwards)."

    def add_arguments(self, parser):
        parser.add_argument("--attempts", type=int, default=1_000_000)
        parser.add_argument("--days", type=int, default=90)
        parser.add_argument("--repeat", type=int, default=5)

    def handle(self, *args, attempts, days, repeat, **options):
        if connection.vendor != "postgresql":
            raise CommandError("bench_usage seeds with PostgreSQL's SQL; set DATABASE_URL")
        if attempts < 1 or days < 1:
            raise CommandError("--attempts and --days must be at least 1")
        figures = rolled_back(lambda: self.measure(attempts, days, repeat))
        self.stdout.write(json.dumps(figures, indent=2))

    def measure(self, attempts: int, days: int, repeat: int) -> dict:
        now = rollup.floor_hour(timezone.now())
        start = now - timedelta(days=days)
        began = time.perf_counter()
        self.seed(attempts, start, (days * 86400 - 6000) / attempts)
        seeded = time.perf_counter() - began
        self.stdout.write(f"seeded {attempts} attempts in {seeded:.1f} s; rolling up ...")
        began = time.perf_counter()
        rows = rollup.roll_up(now, since=start, progress=self.progress)
        rolled = time.perf_counter() - began
        timings = {}
        for group_by in reports.GROUPS:

            def report(group_by=group_by):
                return reports.usage_report(start, now, group_by, reports.Scope())

            report()  # warm
            timings[group_by] = median_ms(report, repeat)
        return {
            "attempts": attempts,
            "days": days,
            "seed_s": round(seeded, 1),
            "rollup_s": round(rolled, 1),
            "hourly_rows": rows,
            "report_ms": {k: round(v, 1) for k, v in timings.items()},
        }

    def progress(self, done, until) -> None:
        if done.hour == 0 and done.day % 10 == 0:
            self.stdout.write(f"  rolled up to {done:%Y-%m-%d}")

    def seed(self, attempts: int, start, spacing: float) -> None:
        tag = f"bench-{time.time_ns()}"
        unit = CapacityUnit.objects.create(name=tag)
        env = ServiceEnvironment.objects.create(name=tag, backend="SIMULATED")
        EnvironmentCapacity.objects.create(environment=env, capacity_unit=unit, max_capacity=1200)
        queue = JobQueue.objects.create(
            name=tag,
            service_environment=env,
            scheduling_policy=SchedulingPolicy.objects.create(name=tag),
        )
        teams = [Team.objects.create(name=f"{tag}-t{i}") for i in range(TEAMS)]
        shares = [
            QuotaShare.objects.create(
                job_queue=queue,
                name=f"share{i}",
                team=teams[i],
                sharing_strategy="LEND_AND_BORROW",
            )
            for i in range(TEAMS)
        ]
        ShareCapacityLimit.objects.bulk_create(
            ShareCapacityLimit(share=s, capacity_unit=unit, max_capacity=100) for s in shares
        )
        user = get_user_model()
        users = user.objects.bulk_create(user(username=f"{tag}-u{i}") for i in range(USERS))
        with connection.cursor() as cursor:
            params = {
                "start": start,
                "spacing": spacing,
                "unit": unit.pk,
                "users": [u.pk for u in users],
                "queue": queue.pk,
                "shares": [s.pk for s in shares],
                "n": attempts,
                "preempted": PREEMPTION_REASONS[PreemptionKind.CROSS_SHARE],
            }
            cursor.execute(JOBS_SQL, params)
            cursor.execute(ATTEMPTS_SQL, params)
            cursor.execute("ANALYZE quotas_job; ANALYZE quotas_jobattempt")
