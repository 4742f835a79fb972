"""The fleet of GPU hosts: placing started jobs on slots, hosts that go quiet (LOST),
draining, releasing and deleting hosts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, HostState, Placement
from quotaportal.infra.bulk import insert_new, update_rows
from quotaportal.jobs.transitions import end_attempt, preemptions_completed
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    DISPATCHED,
    Job,
    JobAttempt,
    ServiceEnvironment,
)
from quotaportal.quotas.permissions import require_admin
from quotaportal.tick.changes import environment_work_changed, queue_changed
from scheduler.placement import place

HOST_LOST = "Host lost"


def capacity_changed(env: ServiceEnvironment) -> None:
    for queue_id in env.job_queues.values_list("id", flat=True):
        queue_changed(queue_id)


def close_placements(host: GpuHost, now, reason: str) -> None:
    """The host's agent no longer runs anything: its ranks are over, their attempts end."""
    open_placements = list(
        Placement.objects.filter(host=host, exited_at__isnull=True).select_related("attempt__job")
    )
    close_still_open([p.pk for p in open_placements], now)
    ended = [
        placement.attempt.job
        for placement in open_placements
        if placement.attempt.stopped_at is None and placement.attempt.job.status in DISPATCHED
    ]
    for job in ended:
        end_attempt(job, succeeded=False, status_reason=reason, now=now)
    record_preemptions_over({p.attempt: now for p in open_placements})
    if ended:  # their ranks on other hosts must stop
        environment_work_changed(host.service_environment_id)
    wake_held_retries(host.service_environment_id, [p.attempt.job_id for p in open_placements])


def close_still_open(placement_ids: list[int], now) -> int:
    """Close these placements at `now`, all but those a report closed since they were read.

    Filtered on the placement table alone, so PostgreSQL re-checks `exited_at IS NULL` on a
    row that a concurrent report has just closed. An UPDATE filtered through a join (Django
    writes `WHERE id IN (SELECT ... JOIN ...)`) re-checks only the id, and overwrote the exit
    the report had dated with this later `now`: the soak saw a GPU's next job start before
    the exit that freed it."""
    return Placement.objects.filter(pk__in=placement_ids, exited_at__isnull=True).update(
        exited_at=now
    )


def record_preemptions_over(closed: dict) -> None:
    """Ranks closed (their attempt -> when): a preempted attempt with no rank left open on any
    host has stopped, and its preemption is over."""
    preempted = {a.pk: (a.job_id, when) for a, when in closed.items() if a.preempted}
    if not preempted:
        return  # the usual exit: nothing was preempted
    still_open = set(
        Placement.objects.filter(
            attempt_id__in=list(preempted), exited_at__isnull=True
        ).values_list("attempt_id", flat=True)
    )
    preemptions_completed(
        dict(value for attempt_id, value in preempted.items() if attempt_id not in still_open)
    )


def finish_quiet_preemptions(queue_id: int, now) -> int:
    """Jobs still waiting for their preempted ranks to stop, none of which is open on any host
    now: their completion went unrecorded (a crash between the last exit and its record), so
    it is recorded here, each tick, and they are planned again. How many."""
    waiting = list(
        Job.objects.filter(job_queue_id=queue_id, preemption_stopping=True).values_list(
            "pk", flat=True
        )
    )
    if not waiting:
        return 0
    still_open = set(
        Placement.objects.filter(
            attempt__job_id__in=waiting, attempt__preempted=True, exited_at__isnull=True
        ).values_list("attempt__job_id", flat=True)
    )
    done = {pk: now for pk in waiting if pk not in still_open}
    preemptions_completed(done)
    return len(done)


def wake_held_retries(env_id: int, job_ids) -> None:
    """Ranks of these jobs closed: a retry of one that waited for them (held back, see
    agents.desired_placements) may start now, so its host's waiting heartbeat is woken."""
    if job_ids and (
        Placement.objects.filter(
            attempt__job_id__in=set(job_ids),
            attempt__stopped_at__isnull=True,
            started_at__isnull=True,
            exited_at__isnull=True,
        ).exists()
    ):
        environment_work_changed(env_id)


def lose_host(host: GpuHost, now, why: str, actor=None) -> None:
    GpuHost.objects.filter(pk=host.pk).update(state=HostState.LOST)
    host.state = HostState.LOST
    close_placements(host, now, HOST_LOST)
    record(actor, "resource_changed", action="lost", resource="host", name=f"{host.name} ({why})")


def mark_lost_hosts(env: ServiceEnvironment, now) -> int:
    """Hosts silent for QP_HOST_TIMEOUT become LOST; their jobs' attempts fail "Host lost".

    Their agents, if alive, stopped those jobs at half the timeout (the lease), so a retry
    elsewhere never runs beside the original.
    """
    cutoff = now - timedelta(seconds=settings.QP_HOST_TIMEOUT)
    silent = list(
        GpuHost.objects.filter(
            service_environment=env,
            state__in=(HostState.READY, HostState.DRAINING),
            last_heartbeat__lt=cutoff,
        )
    )
    for host in silent:
        lose_host(host, now, "no heartbeat")
    if silent:
        capacity_changed(env)
    return len(silent)


def set_host_state(actor, host: GpuHost, state: str) -> GpuHost:
    """Admins drain a host (no new jobs; running ones finish) or make it READY again."""
    require_admin(actor, "drain hosts")
    if state not in (HostState.READY, HostState.DRAINING):
        raise InvalidInput({"state": "state must be READY or DRAINING"})
    GpuHost.objects.filter(pk=host.pk).update(state=state)
    record(actor, "resource_changed", action=state.lower(), resource="host", name=host.name)
    capacity_changed(host.service_environment)
    host.state = state
    return host


@transaction.atomic
def release_host(actor, host: GpuHost) -> GpuHost:
    """Free the host's name for another agent token: the host goes LOST until one registers."""
    require_admin(actor, "release hosts")
    if host.state != HostState.LOST:
        lose_host(host, timezone.now(), "released by an admin", actor)
    GpuHost.objects.filter(pk=host.pk).update(agent_token=None)
    AgentToken.objects.filter(pk=host.agent_token_id, host_name=host.name).update(
        revoked=True, revoked_at=timezone.now()
    )
    host.agent_token = None
    record(actor, "resource_changed", action="released", resource="host", name=host.name)
    capacity_changed(host.service_environment)
    return host


def delete_host(actor, host: GpuHost) -> None:
    """Admins delete a LOST host (its attempts keep their history without the host link)."""
    require_admin(actor, "delete hosts")
    if host.state != HostState.LOST:
        raise Conflict(
            f"host {host.name} is {host.state}; only a LOST host can be deleted "
            "(stop its agent, or release the host, first)"
        )
    name = host.name
    host.delete()
    record(actor, "resource_changed", action="deleted", resource="host", name=name)


# The READY hosts' slots, each row with one slot list the host's open attempts hold (or none):
# one statement for what the ORM read with two (hosts as models, then their placements).
HOST_SLOTS_SQL = f"""
    SELECT h.id, h.name, h.slots, h.gpu_indices, h.capacity_unit_id, p.slot_numbers
    FROM hosts_gpuhost h
    LEFT JOIN hosts_placement p ON p.host_id = h.id AND p.attempt_id IN (
        SELECT a.id FROM quotas_jobattempt a WHERE a.stopped_at IS NULL
    )
    WHERE h.service_environment_id = %s AND h.state = '{HostState.READY}'
"""


@dataclass
class _Host:
    """A READY host as placing sees it: its slots, their GPUs, and the slots taken so far."""

    id: int
    name: str
    slots: int
    gpu_indices: list
    unit_id: int
    taken: set = field(default_factory=set)

    def free_slots(self) -> list[int]:
        return [s for s in range(self.slots) if s not in self.taken]

    def gpus_of(self, slots: list[int]) -> list[int]:
        """The GPU indices these slots own (a slot without a listed group is its own GPU)."""
        groups = self.gpu_indices
        return [g for s in slots for g in (groups[s] if s < len(groups) else [s])]


def _ready_hosts(env_id: int) -> dict[str, _Host]:
    """The environment's READY hosts by name, each with the slots its open attempts hold."""
    hosts: dict[str, _Host] = {}
    with connection.cursor() as cursor:
        cursor.execute(HOST_SLOTS_SQL, [env_id])
        for host_id, name, slots, gpus, unit_id, taken in cursor.fetchall():
            if name not in hosts:
                hosts[name] = _Host(host_id, name, slots, _json(gpus), unit_id)
            hosts[name].taken.update(_json(taken) or ())
    return hosts


def _json(value):
    """A JSON column's value from a raw row: its text (Django has psycopg leave JSON to the
    field, and SQLite stores text); NULL stays None."""
    return json.loads(value) if isinstance(value, str) else value


def place_started_jobs(env: ServiceEnvironment, job_ids: list[str], now) -> list[str]:
    """Give each newly dispatched job GPU slots on READY hosts (fewest hosts first).

    Returns the jobs that could not be placed (capacity raced away); the caller requeues them.
    """
    hosts = _ready_hosts(env.pk)
    # Only the columns placing needs, and the writes in bulk: this runs inside every tick
    # that starts work, so its cost is paid per freed GPU.
    jobs = JobAttempt.objects.filter(job_id__in=job_ids, stopped_at__isnull=True).values_list(
        "job_id", "id", "job__quantity", "job__capacity_unit_id"
    )
    order = {job_id: index for index, job_id in enumerate(job_ids)}
    unplaced, placements = [], []
    for job_id, attempt, quantity, unit_id in sorted(jobs, key=lambda j: order[str(j[0])]):
        free_slots = {h.name: h.free_slots() for h in hosts.values() if h.unit_id == unit_id}
        chosen = place(quantity, {name: len(s) for name, s in free_slots.items()})
        if chosen is None:
            unplaced.append(str(job_id))
            continue
        for rank, (host_name, count) in enumerate(chosen):
            host, slots = hosts[host_name], free_slots[host_name][:count]
            host.taken.update(slots)
            placements.append(
                Placement(
                    attempt_id=attempt,
                    host_id=host.id,
                    rank=rank,
                    slot_numbers=slots,
                    gpu_indices=host.gpus_of(slots),
                )
            )
    _save_placements(placements)
    return unplaced


def _save_placements(placements: list[Placement]) -> None:
    """The placements and, on each attempt, its rank 0's host: two statements for any number
    of jobs."""
    if not placements:
        return
    insert_new(placements)
    firsts = [p for p in placements if p.rank == 0]
    update_rows(
        JobAttempt, [p.attempt_id for p in firsts], {"host_id": [p.host_id for p in firsts]}
    )
