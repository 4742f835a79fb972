"""The LOCAL backend: capacity is the READY hosts' slots, hosts that go quiet are LOST, and
started jobs are placed on GPU slots (their agents learn of them at the next heartbeat)."""

from __future__ import annotations

from django.db.models import Sum

from quotaportal.hosts.models import GpuHost, HostState
from quotaportal.hosts.services import mark_lost_hosts, place_started_jobs, requeue_unplaced
from quotaportal.quotas.backends import EnvironmentBackend


class LocalBackend(EnvironmentBackend):
    def capacity(self, env, limits: dict[str, int]) -> dict[str, int]:
        slots = dict(
            GpuHost.objects.filter(service_environment=env, state=HostState.READY)
            .values_list("capacity_unit__name")
            .annotate(total=Sum("slots"))
        )
        return {unit: min(count, slots.get(unit, 0)) for unit, count in limits.items()}

    def advance(self, queue, now) -> None:
        mark_lost_hosts(queue.service_environment, now)

    def launch(self, queue, job_ids: list[str], now) -> list[str]:
        unplaced = place_started_jobs(queue.service_environment, job_ids, now)
        if unplaced:
            requeue_unplaced(unplaced)
        return unplaced
