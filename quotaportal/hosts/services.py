"""Writes for LOCAL environments: agent tokens, host registration, heartbeats, reports,
placement of dispatched jobs on hosts, and host loss. Part of the one services layer; the
agent API, the tick and the commands call these."""

from __future__ import annotations

import hashlib
import secrets
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, HostState, Placement
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import (
    DISPATCHED,
    Backend,
    CapacityUnit,
    Job,
    JobAttempt,
    JobStatus,
    ServiceEnvironment,
)
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.audit import record
from quotaportal.quotas.services.lifecycle import end_attempt, mark_started
from quotaportal.quotas.services.ticks import queue_changed
from scheduler.placement import place

HOST_LOST = "Host lost"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_agent_token(actor, env: ServiceEnvironment) -> str:
    """A new token for agents of a LOCAL environment; shown once, stored hashed."""
    require_admin(actor, "create agent tokens")
    if env.backend != Backend.LOCAL:
        raise InvalidInput(
            {"service_environment": f"{env.name} is {env.backend}; agents join LOCAL environments"}
        )
    token = secrets.token_urlsafe(32)
    AgentToken.objects.create(environment=env, key_hash=_digest(token))
    record(actor, "resource_changed", action="created", resource="agent token", name=env.name)
    return token


def environment_for_token(token: str) -> ServiceEnvironment | None:
    found = (
        AgentToken.objects.select_related("environment")
        .filter(key_hash=_digest(token), revoked=False)
        .first()
    )
    return found.environment if found else None


def _capacity_changed(env: ServiceEnvironment) -> None:
    for queue_id in env.job_queues.values_list("id", flat=True):
        queue_changed(queue_id)


@transaction.atomic
def register_host(
    env: ServiceEnvironment, *, name: str, capacity_unit: str, gpus: list[int], address: str = ""
) -> GpuHost:
    """A host (re)joins: its GPUs are grouped into slots of the unit's gpus_per_unit."""
    unit = CapacityUnit.objects.filter(name=capacity_unit).first()
    if unit is None:
        raise InvalidInput({"capacity_unit": f"capacity unit {capacity_unit} does not exist"})
    if not name or len(name) > 128:
        raise InvalidInput({"name": "host name must be 1 to 128 characters"})
    if not isinstance(gpus, list) or not all(isinstance(g, int) and g >= 0 for g in gpus):
        raise InvalidInput({"gpus": "gpus must be a list of GPU indices"})
    per_slot = unit.gpus_per_unit
    groups = [gpus[i : i + per_slot] for i in range(0, len(gpus) - per_slot + 1, per_slot)]
    host, _ = GpuHost.objects.select_for_update().get_or_create(
        name=name, defaults={"service_environment": env, "capacity_unit": unit}
    )
    if host.service_environment_id != env.id:
        raise InvalidInput(
            {"name": f"host {name} belongs to environment {host.service_environment.name}"}
        )
    host.capacity_unit, host.address = unit, address or name
    host.slots, host.gpu_indices = len(groups), groups
    if host.state == HostState.LOST:
        host.state = HostState.READY
    host.last_heartbeat = timezone.now()
    host.save()
    _capacity_changed(env)
    return host


def _host(env: ServiceEnvironment, name: str) -> GpuHost:
    host = GpuHost.objects.filter(service_environment=env, name=name).first()
    if host is None:
        raise InvalidInput({"name": f"host {name} is not registered; register it first"})
    return host


def desired_placements(host: GpuHost) -> list[dict]:
    """What should run on the host now: open attempts of dispatched jobs placed on it."""
    placements = (
        Placement.objects.filter(
            host=host,
            attempt__stopped_at__isnull=True,
            attempt__job__status__in=DISPATCHED,
            exit_code__isnull=True,
        )
        .select_related("attempt__job__job_queue")
        .prefetch_related(
            # Heartbeats come every second from every host: fetch each job's ranks in one query.
            Prefetch(
                "attempt__placements",
                queryset=Placement.objects.select_related("host").order_by("rank"),
            )
        )
    )
    result = []
    for p in placements:
        job = p.attempt.job
        world = list(p.attempt.placements.all())
        master = world[0].host
        result.append(
            {
                "placement": p.id,
                "job_id": str(job.id),
                "attempt": p.attempt.number,
                "rank": p.rank,
                "world_size": len(world),
                "master_addr": master.address or master.name,
                "gpu_indices": p.gpu_indices,
                "command": job.command or "true",
                "grace_seconds": job.job_queue.preemption_grace_seconds,
            }
        )
    return result


def heartbeat(env: ServiceEnvironment, name: str) -> list[dict]:
    host = _host(env, name)
    was_lost = host.state == HostState.LOST
    GpuHost.objects.filter(pk=host.pk).update(last_heartbeat=timezone.now())
    if was_lost:
        # A lost host keeps nothing: its jobs were failed over. It must register again.
        raise InvalidInput({"name": f"host {name} was marked LOST; register it again"})
    return desired_placements(host)


@transaction.atomic
def report(
    env: ServiceEnvironment,
    name: str,
    *,
    placement: int,
    event: str,
    exit_code: int | None = None,
    output_tail: str = "",
) -> None:
    """An agent reports a rank started or exited. Stale reports change nothing."""
    host = _host(env, name)
    found = (
        Placement.objects.select_for_update()
        .select_related("attempt__job")
        .filter(pk=placement, host=host)
        .first()
    )
    if found is None:
        raise InvalidInput({"placement": f"placement {placement} is not on host {name}"})
    now = timezone.now()
    job = found.attempt.job
    if event == "started":
        found.started_at = found.started_at or now
        found.save(update_fields=["started_at"])
        if found.attempt.stopped_at is None:
            mark_started(job, now)
        return
    if event == "output":
        if found.exit_code is None:
            found.output_tail = output_tail[-8000:]
            found.save(update_fields=["output_tail"])
        return
    if event != "exited":
        raise InvalidInput({"event": "event must be started, output or exited"})
    if found.exit_code is not None:
        return  # already reported
    found.exit_code, found.exited_at, found.output_tail = exit_code, now, output_tail[-8000:]
    found.save(update_fields=["exit_code", "exited_at", "output_tail"])
    if found.attempt.stopped_at is not None:
        return  # preempted or terminated: the attempt is over already
    if exit_code != 0:
        end_attempt(
            job, succeeded=False, status_reason=f"Exited with code {exit_code}", exit_code=exit_code
        )
    elif not found.attempt.placements.filter(exit_code__isnull=True).exists():
        end_attempt(job, succeeded=True, status_reason="Completed", exit_code=0)


def place_started_jobs(env: ServiceEnvironment, job_ids: list[str], now) -> list[str]:
    """Give each newly dispatched job GPU slots on READY hosts (fewest hosts first).

    Returns the jobs that could not be placed (capacity raced away); the caller requeues them.
    """
    hosts = {
        h.id: h for h in GpuHost.objects.filter(service_environment=env, state=HostState.READY)
    }
    taken: dict[int, set[int]] = defaultdict(set)
    for host_id, slots in Placement.objects.filter(
        host_id__in=list(hosts), attempt__stopped_at__isnull=True
    ).values_list("host_id", "slot_numbers"):
        taken[host_id].update(slots)
    jobs = Job.objects.filter(id__in=job_ids).select_related("capacity_unit")
    attempts = {
        a.job_id: a for a in JobAttempt.objects.filter(job_id__in=job_ids, stopped_at__isnull=True)
    }
    order = {job_id: index for index, job_id in enumerate(job_ids)}
    by_name = {h.name: h for h in hosts.values()}
    unplaced = []
    for job in sorted(jobs, key=lambda j: order[str(j.id)]):
        free_slots = {
            h.name: [s for s in range(h.slots) if s not in taken[h.id]]
            for h in hosts.values()
            if h.capacity_unit_id == job.capacity_unit_id
        }
        chosen = place(job.quantity, {name: len(s) for name, s in free_slots.items()})
        if chosen is None:
            unplaced.append(str(job.id))
            continue
        for rank, (host_name, count) in enumerate(chosen):
            host = by_name[host_name]
            slots = free_slots[host_name][:count]
            taken[host.id].update(slots)
            gpus = [
                g
                for s in slots
                for g in (host.gpu_indices[s] if s < len(host.gpu_indices) else [s])
            ]
            Placement.objects.create(
                attempt=attempts[job.id], host=host, rank=rank, slot_numbers=slots, gpu_indices=gpus
            )
        JobAttempt.objects.filter(pk=attempts[job.id].pk).update(host=by_name[chosen[0][0]])
    return unplaced


def mark_lost_hosts(env: ServiceEnvironment, now) -> int:
    """Hosts silent for QP_HOST_TIMEOUT become LOST; their jobs' attempts fail "Host lost"."""
    cutoff = now - timedelta(seconds=settings.QP_HOST_TIMEOUT)
    silent = list(
        GpuHost.objects.filter(
            service_environment=env,
            state__in=(HostState.READY, HostState.DRAINING),
            last_heartbeat__lt=cutoff,
        )
    )
    for host in silent:
        GpuHost.objects.filter(pk=host.pk).update(state=HostState.LOST)
        for placement in Placement.objects.filter(
            host=host, attempt__stopped_at__isnull=True
        ).select_related("attempt__job"):
            job = placement.attempt.job
            if job.status in DISPATCHED:
                end_attempt(job, succeeded=False, status_reason=HOST_LOST, now=now)
        record(None, "resource_changed", action="lost", resource="host", name=host.name)
    if silent:
        _capacity_changed(env)
    return len(silent)


def set_host_state(actor, host: GpuHost, state: str) -> GpuHost:
    """Admins drain a host (no new jobs; running ones finish) or make it READY again."""
    require_admin(actor, "drain hosts")
    if state not in (HostState.READY, HostState.DRAINING):
        raise InvalidInput({"state": "state must be READY or DRAINING"})
    GpuHost.objects.filter(pk=host.pk).update(state=state)
    record(actor, "resource_changed", action=state.lower(), resource="host", name=host.name)
    _capacity_changed(host.service_environment)
    host.state = state
    return host


def requeue_unplaced(job_ids: list[str]) -> None:
    Job.objects.filter(id__in=job_ids, status=JobStatus.SCHEDULED).update(
        status=JobStatus.RUNNABLE, scheduled_at=None, status_reason="No host could hold it; waiting"
    )
    JobAttempt.objects.filter(job_id__in=job_ids, stopped_at__isnull=True).delete()
