"""Writes for LOCAL environments: agent tokens, host registration, heartbeats, reports,
placement of dispatched jobs on hosts, and host loss. Part of the one services layer; the
agent API, the tick and the commands call these."""

from __future__ import annotations

import hashlib
import re
import secrets
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Prefetch
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, HostState, Placement
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
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
# Host names go into logs, commands and environment variables: keep them plain.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
HOST_NAME_RULE = (
    "host name must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_host_name(name: str) -> None:
    if not isinstance(name, str) or not HOST_NAME.fullmatch(name):
        raise InvalidInput({"name": HOST_NAME_RULE})


def create_agent_token(actor, env: ServiceEnvironment, host_name: str = "") -> str:
    """A new agent identity for one host of a LOCAL environment; shown once, stored hashed.

    With `host_name` the token serves only that host; without, it binds to the first host
    name it registers.
    """
    require_admin(actor, "create agent tokens")
    if env.backend != Backend.LOCAL:
        raise InvalidInput(
            {"service_environment": f"{env.name} is {env.backend}; agents join LOCAL environments"}
        )
    if host_name:
        check_host_name(host_name)
    token = secrets.token_urlsafe(32)
    AgentToken.objects.create(
        environment=env, key_hash=_digest(token), prefix=token[:6], host_name=host_name
    )
    record(
        actor,
        "resource_changed",
        action="created",
        resource="agent token",
        name=f"{env.name}: {token[:6]}… for {host_name or 'the first host to register'}",
    )
    return token


def token_for(key: str) -> AgentToken | None:
    return (
        AgentToken.objects.select_related("environment")
        .filter(key_hash=_digest(key), revoked=False)
        .first()
    )


def _capacity_changed(env: ServiceEnvironment) -> None:
    for queue_id in env.job_queues.values_list("id", flat=True):
        queue_changed(queue_id)


def _claim_name(token: AgentToken, name: str) -> None:
    """One token speaks for one host name; a name belongs to one live token."""
    if token.host_name and token.host_name != name:
        raise Forbidden(f"this agent token belongs to host {token.host_name}, not {name}")
    owner = (
        GpuHost.objects.filter(name=name)
        .exclude(agent_token__isnull=True)
        .exclude(agent_token=token)
        .filter(agent_token__revoked=False)
        .exists()
    )
    if owner:
        raise Forbidden(
            f"host {name} belongs to another agent token; an admin must release the host "
            "or revoke that token first"
        )
    if not token.host_name:
        # Conditional, so two agents racing with one fresh token cannot both bind it.
        bound = AgentToken.objects.filter(pk=token.pk, host_name="").update(host_name=name)
        token.refresh_from_db(fields=["host_name"])
        if not bound and token.host_name != name:
            raise Forbidden(f"this agent token belongs to host {token.host_name}, not {name}")


@transaction.atomic
def register_host(
    token: AgentToken,
    *,
    name: str,
    capacity_unit: str,
    gpus: list[int],
    address: str = "",
) -> GpuHost:
    """A host (re)joins: its GPUs are grouped into slots of the unit's gpus_per_unit.

    A registering agent has stopped every job it ran before (its state file), so attempts
    still open on the host end as "Host lost" and may retry.
    """
    env = token.environment
    check_host_name(name)
    unit = CapacityUnit.objects.filter(name=capacity_unit).first()
    if unit is None:
        raise InvalidInput({"capacity_unit": f"capacity unit {capacity_unit} does not exist"})
    if not isinstance(gpus, list) or not all(isinstance(g, int) and g >= 0 for g in gpus):
        raise InvalidInput({"gpus": "gpus must be a list of GPU indices"})
    _claim_name(token, name)
    per_slot = unit.gpus_per_unit
    groups = [gpus[i : i + per_slot] for i in range(0, len(gpus) - per_slot + 1, per_slot)]
    host, _ = GpuHost.objects.select_for_update().get_or_create(
        name=name, defaults={"service_environment": env, "capacity_unit": unit}
    )
    if host.service_environment_id != env.id:
        raise InvalidInput(
            {"name": f"host {name} belongs to environment {host.service_environment.name}"}
        )
    now = timezone.now()
    _close_placements(host, now, HOST_LOST)
    host.capacity_unit, host.address = unit, address or name
    host.slots, host.gpu_indices = len(groups), groups
    host.agent_token = token
    if host.state == HostState.LOST:
        host.state = HostState.READY
    host.last_heartbeat = now
    host.save()
    _capacity_changed(env)
    return host


def _host(token: AgentToken, name: str) -> GpuHost:
    host = GpuHost.objects.filter(service_environment=token.environment, name=name).first()
    if host is None:
        raise InvalidInput({"name": f"host {name} is not registered; register it first"})
    if host.agent_token_id != token.id:
        raise Forbidden(f"host {name} belongs to another agent token")
    return host


def desired_placements(host: GpuHost) -> list[dict]:
    """What should run on the host now: open attempts of dispatched jobs placed on it.

    A retry is held back while an earlier attempt of the same job still runs on a host that
    is not LOST (a preempted rank checkpointing elsewhere): a job never runs twice at once.
    """
    earlier_still_running = Placement.objects.filter(
        attempt__job_id=OuterRef("attempt__job_id"),
        attempt__number__lt=OuterRef("attempt__number"),
        exit_code__isnull=True,
        exited_at__isnull=True,
    ).exclude(host__state=HostState.LOST)
    placements = (
        Placement.objects.filter(
            host=host,
            attempt__stopped_at__isnull=True,
            attempt__job__status__in=DISPATCHED,
            exit_code__isnull=True,
            exited_at__isnull=True,
        )
        .exclude(Exists(earlier_still_running))
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


def heartbeat(token: AgentToken, name: str, running: list[int] | None = None) -> dict:
    """What should run on the host, and the lease: how long the agent may go unheard.

    `running` lists the placements the agent runs now. A rank whose attempt ended before the
    agent ever started it (preempted or terminated at once) gets no exit report; the agent's
    word that it does not run it closes it, so it never holds back its job's retry.
    """
    host = _host(token, name)
    was_lost = host.state == HostState.LOST
    now = timezone.now()
    GpuHost.objects.filter(pk=host.pk).update(last_heartbeat=now)
    if was_lost:
        # A lost host keeps nothing: its jobs were failed over. It must register again.
        raise InvalidInput({"name": f"host {name} was marked LOST; register it again"})
    if running is not None:
        Placement.objects.filter(
            host=host, exited_at__isnull=True, attempt__stopped_at__isnull=False
        ).exclude(pk__in=running).update(exited_at=now)
    return {"placements": desired_placements(host), "lease_seconds": settings.QP_HOST_TIMEOUT}


@transaction.atomic
def report(
    token: AgentToken,
    name: str,
    *,
    placement: int,
    event: str,
    exit_code: int | None = None,
    output_tail: str = "",
    reason: str = "",
) -> None:
    """An agent reports a rank started, its output, or its exit. Stale reports change nothing.

    Only the host that holds the placement may report on it. `reason` on an exit explains an
    end that is not the job's own doing (it could not start, its agent lost contact).
    """
    host = _host(token, name)
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
        if found.exited_at is None:
            found.output_tail = output_tail[-8000:]
            found.save(update_fields=["output_tail"])
        return
    if event != "exited":
        raise InvalidInput({"event": "event must be started, output or exited"})
    if found.exited_at is not None:
        return  # already reported
    found.exit_code, found.exited_at, found.output_tail = exit_code, now, output_tail[-8000:]
    found.save(update_fields=["exit_code", "exited_at", "output_tail"])
    if found.attempt.stopped_at is not None:
        return  # preempted or terminated: the attempt is over already
    if reason or exit_code != 0:
        end_attempt(
            job,
            succeeded=False,
            status_reason=reason or f"Exited with code {exit_code}",
            exit_code=exit_code,
        )
    elif not found.attempt.placements.filter(exited_at__isnull=True).exists():
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


def _close_placements(host: GpuHost, now, reason: str) -> None:
    """The host's agent no longer runs anything: its ranks are over, their attempts end."""
    open_placements = list(
        Placement.objects.filter(host=host, exited_at__isnull=True).select_related("attempt__job")
    )
    Placement.objects.filter(pk__in=[p.pk for p in open_placements]).update(exited_at=now)
    for placement in open_placements:
        job = placement.attempt.job
        if placement.attempt.stopped_at is None and job.status in DISPATCHED:
            end_attempt(job, succeeded=False, status_reason=reason, now=now)


def _lose(host: GpuHost, now, why: str, actor=None) -> None:
    GpuHost.objects.filter(pk=host.pk).update(state=HostState.LOST)
    host.state = HostState.LOST
    _close_placements(host, now, HOST_LOST)
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
        _lose(host, now, "no heartbeat")
    if silent:
        _capacity_changed(env)
    return len(silent)


def agent_tokens(actor, env: ServiceEnvironment | None = None):
    require_admin(actor, "list agent tokens")
    tokens = AgentToken.objects.select_related("environment").prefetch_related("hosts")
    if env is not None:
        tokens = tokens.filter(environment=env)
    return tokens.order_by("-created_at", "-id")


@transaction.atomic
def revoke_agent_token(actor, token: AgentToken) -> AgentToken:
    """The token stops working at once; its hosts go LOST and their jobs fail over."""
    require_admin(actor, "revoke agent tokens")
    now = timezone.now()
    AgentToken.objects.filter(pk=token.pk).update(revoked=True, revoked_at=now)
    token.revoked, token.revoked_at = True, now
    hosts = list(GpuHost.objects.filter(agent_token=token).exclude(state=HostState.LOST))
    for host in hosts:
        _lose(host, now, "agent token revoked", actor)
    record(
        actor,
        "resource_changed",
        action="revoked",
        resource="agent token",
        name=f"{token.environment.name}: {token.prefix}… ({token.host_name or 'unbound'})",
    )
    if hosts:
        _capacity_changed(token.environment)
    return token


@transaction.atomic
def release_host(actor, host: GpuHost) -> GpuHost:
    """Free the host's name for another agent token: the host goes LOST until one registers."""
    require_admin(actor, "release hosts")
    if host.state != HostState.LOST:
        _lose(host, timezone.now(), "released by an admin", actor)
    GpuHost.objects.filter(pk=host.pk).update(agent_token=None)
    AgentToken.objects.filter(pk=host.agent_token_id, host_name=host.name).update(
        revoked=True, revoked_at=timezone.now()
    )
    host.agent_token = None
    record(actor, "resource_changed", action="released", resource="host", name=host.name)
    _capacity_changed(host.service_environment)
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
