"""manage.py seed_demo — the three shares of AWS's quota-management walkthrough, teams, users.

Idempotent: existing objects are kept. Passwords are generated and printed (or --password).
"""

from __future__ import annotations

import secrets
import shlex
import sys

from django.core.management.base import BaseCommand

from quotaportal.quotas import services
from quotaportal.quotas.models import (
    CapacityUnit,
    JobQueue,
    SchedulingPolicy,
    ServiceEnvironment,
    Team,
)

UNIT = "ml.g5.xlarge"
QUEUE = "gpu-queue"
SHARES = [  # name, team, strategy, borrow limit, in-share preemption
    ("QS1", "research", "LEND_AND_BORROW", 200, True),
    ("QS2", "vision", "LEND", None, False),
    ("QS3", "prod", "RESERVE", None, False),
]
USERS = [
    ("admin", [], True),
    ("alice", ["research"], False),
    ("bob", ["vision"], False),
    ("carol", ["prod"], False),
]


def role_of(teams: list[str], admin: bool) -> str:
    """Who a demo user is: "(admin)" or "team research, submits to QS1"."""
    if admin:
        return "(admin: edits shares, sees everything)"
    owned = [name for name, team, *_ in SHARES if team in teams]
    return f"team {', '.join(teams)}, submits to {', '.join(owned) or 'no share'}"


class Command(BaseCommand):
    help = "Seed the demo: AWS's walkthrough shares on a SIMULATED environment, teams and users."

    def add_arguments(self, parser):
        parser.add_argument("--password", help="one password for every demo user (default: random)")
        parser.add_argument("--capacity", type=int, default=3, help="instances of ml.g5.xlarge")
        parser.add_argument("--jobs", action="store_true", help="also submit a few example jobs")
        parser.add_argument(
            "--backend",
            choices=["SIMULATED", "LOCAL"],
            default="SIMULATED",
            help="LOCAL: jobs run on quotaportal-agent hosts",
        )

    def handle(self, *args, password, capacity, jobs, backend, **options):
        self.backend = backend
        queue = self.seed_resources(capacity)
        for username, teams, admin in USERS:
            secret = password or secrets.token_urlsafe(9)
            _, token = services.create_user(username, teams=teams, admin=admin, password=secret)
            self.stdout.write(
                f"user {username:<6} password {secret}  token {token}  {role_of(teams, admin)}"
            )
        if jobs:
            self.submit_examples(queue)
        self.stdout.write(
            f"seeded job queue {queue.name}: shares " + ", ".join(s[0] for s in SHARES)
        )

    def seed_resources(self, capacity: int) -> JobQueue:
        if not CapacityUnit.objects.filter(name=UNIT).exists():
            services.create_capacity_unit(
                None, name=UNIT, description="1 x NVIDIA A10G (AWS walkthrough)"
            )
        env = ServiceEnvironment.objects.filter(
            name="demo"
        ).first() or services.create_service_environment(
            None, name="demo", capacity_limits={UNIT: capacity}, backend=self.backend
        )
        policy = SchedulingPolicy.objects.filter(
            name="fifo"
        ).first() or services.create_scheduling_policy(None, name="fifo")
        queue = JobQueue.objects.filter(name=QUEUE).first() or services.create_job_queue(
            None, name=QUEUE, scheduling_policy=policy, service_environment=env
        )
        for name, team, strategy, borrow, in_share in SHARES:
            team_row, _ = Team.objects.get_or_create(name=team)
            if not queue.quota_shares.filter(name=name).exists():
                services.create_share(
                    None,
                    job_queue=queue,
                    name=name,
                    team=team_row,
                    capacity_limits={UNIT: 1},
                    sharing_strategy=strategy,
                    borrow_limit=borrow,
                    in_share_preemption=in_share,
                )
        return queue

    def submit_examples(self, queue: JobQueue) -> None:
        """Jobs whose commands print progress and checkpoint on SIGTERM (hosts.demo_job)."""
        examples = [
            ("QS1", "qs1-train-high", 3, 45),
            ("QS1", "qs1-train-med", 2, 60),
            ("QS1", "qs1-train-low", 1, 60),
            ("QS2", "qs2-finetune", 1, 20),
        ]
        for share, name, priority, seconds in examples:
            command = (
                f"{shlex.quote(sys.executable)} -m quotaportal.hosts.demo_job --seconds {seconds}"
            )
            services.submit_job(
                None,
                job_queue=queue,
                quota_share=share,
                capacity_unit=UNIT,
                name=name,
                scheduling_priority=priority,
                simulated_duration_seconds=seconds,
                command=command,
            )
