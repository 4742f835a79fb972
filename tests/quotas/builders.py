"""Builders the tests share."""

from __future__ import annotations

from django.db.models import Sum

from quotaportal.quotas import services
from quotaportal.quotas.models import DISPATCHED, Job, Team


def two_queues(admin, *, capacity: int, backend: str = "SIMULATED"):
    """Queues hi (priority 10) and lo (priority 1) on one environment, each with one share
    whose limit is the whole capacity."""
    services.create_capacity_unit(admin, name="a100")
    env = services.create_service_environment(
        admin, name="shared", backend=backend, capacity_limits={"a100": capacity}
    )
    policy = services.create_scheduling_policy(admin, name="fifo")
    queues = {}
    for name, priority, team in (("hi", 10, "vision"), ("lo", 1, "nlp")):
        queue = services.create_job_queue(
            admin, name=name, priority=priority, scheduling_policy=policy, service_environment=env
        )
        services.create_share(
            admin,
            job_queue=queue,
            name=f"{name}-share",
            team=Team.objects.get(name=team),
            capacity_limits={"a100": capacity},
            sharing_strategy="LEND_AND_BORROW",
        )
        queues[name] = queue
    return env, queues


def put(queue, n: int, quantity: int, prefix: str, **fields):
    return [
        services.submit_job(
            None,
            job_queue=queue,
            quota_share=f"{queue.name}-share",
            capacity_unit="a100",
            name=f"{prefix}{i}",
            quantity=quantity,
            **fields,
        )
        for i in range(n)
    ]


def in_use(env) -> int:
    held = Job.objects.filter(job_queue__service_environment=env, status__in=DISPATCHED)
    return held.aggregate(n=Sum("quantity"))["n"] or 0
