"""The LOCAL backend: capacity is the READY hosts' slots, hosts that go quiet are LOST, and
started jobs are placed on GPU slots (their agents learn of them at the next heartbeat)."""

from __future__ import annotations

from django.db import connection

from quotaportal.hosts.models import HostState
from quotaportal.hosts.services import (
    finish_quiet_preemptions,
    mark_lost_hosts,
    place_started_jobs,
)
from quotaportal.jobs.transitions import return_unplaced
from quotaportal.quotas.backends import EnvironmentBackend

# Every tick asks (an agent's batch of reports brings one): written out, one short statement.
READY_SLOTS_SQL = f"""
    SELECT u.name, SUM(h.slots) FROM hosts_gpuhost h
    JOIN quotas_capacityunit u ON u.id = h.capacity_unit_id
    WHERE h.service_environment_id = %s AND h.state = '{HostState.READY}'
    GROUP BY u.name
"""


class LocalBackend(EnvironmentBackend):
    preemption_stops_at_once = False  # its ranks exit after the grace period (reports)
    capacity_source = "the READY hosts' slots"

    def capacity(self, env, limits: dict[str, int]) -> dict[str, int]:
        with connection.cursor() as cursor:
            cursor.execute(READY_SLOTS_SQL, [env.pk])
            slots = dict(cursor.fetchall())
        return {unit: min(count, slots.get(unit, 0)) for unit, count in limits.items()}

    def advance(self, queue, now) -> None:
        mark_lost_hosts(queue.service_environment, now)
        finish_quiet_preemptions(queue.pk, now)

    def launch(self, queue, job_ids: list[str], now) -> list[str]:
        unplaced = place_started_jobs(queue.service_environment, job_ids, now)
        if unplaced:
            return_unplaced(unplaced)
        return unplaced
