"""The agent protocol's writes: a host registers and heartbeats (answered with what should
run). Its reports of starts, output and exits are in services.reports."""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, HostState, Placement
from quotaportal.hosts.services import long_polls
from quotaportal.hosts.services.fleet import (
    HOST_LOST,
    capacity_changed,
    close_placements,
    close_still_open,
    record_preemptions_over,
    wake_held_retries,
)
from quotaportal.hosts.services.tokens import check_host_name
from quotaportal.infra import redis_client, wakeups
from quotaportal.jobs.fields import MAX_COMMAND_BYTES
from quotaportal.jobs.transitions import mark_starting
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import DISPATCHED, CapacityUnit, JobStatus

log = logging.getLogger(__name__)


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
    close_placements(host, now, HOST_LOST)
    host.capacity_unit, host.address = unit, address or name
    host.slots, host.gpu_indices = len(groups), groups
    host.agent_token = token
    if host.state == HostState.LOST:
        host.state = HostState.READY
    host.last_heartbeat = now
    host.save()
    capacity_changed(env)
    return host


def host_of(token: AgentToken, name: str) -> GpuHost:
    host = GpuHost.objects.filter(service_environment=token.environment, name=name).first()
    if host is None:
        raise InvalidInput({"name": f"host {name} is not registered; register it first"})
    if host.agent_token_id != token.id:
        raise Forbidden(f"host {name} belongs to another agent token")
    return host


def desired_placements(host: GpuHost) -> tuple[list[dict], int, list]:
    """What should run on the host now: open attempts of dispatched jobs placed on it; the
    host's newest placement id (host_work's horizon), both read by one statement; and the
    jobs still SCHEDULED among those free to start (an answer hands them to their host).

    A retry is held back (listed with `hold`, to start later) while an earlier attempt of the
    same job still runs on a host that is not LOST (a preempted rank checkpointing
    elsewhere): a job never runs twice at once. It is listed rather than left out because the
    agent takes a placement an answer leaves out as ended for good (host_work's horizon).
    """
    rows = _placement_rows(host)
    desired = [
        {
            "placement": placement,
            "job_id": str(job),
            "attempt": number,
            "rank": rank,
            "world_size": size,
            "master_addr": master,
            "gpu_indices": gpus,
            "command": cmd or "true",
            "grace_seconds": grace,
            "hold": hold,
            **({"array_index": index} if index is not None else {}),
        }
        for (
            wanted,
            placement,
            job,
            number,
            rank,
            gpus,
            cmd,
            grace,
            hold,
            master,
            size,
            _,
            index,
        ) in rows
        if wanted
    ]
    handed = sorted({row[2] for row in rows if row[0] and not row[8] and row[11] == SCHEDULED})
    return desired, max((row[1] for row in rows), default=0), handed


SCHEDULED = str(JobStatus.SCHEDULED)
# A placement whose rank should be running: its attempt is open and it has not exited.
_WANTED = (
    f"(j.status IN ({', '.join(repr(str(status)) for status in DISPATCHED)}) "
    "AND a.stopped_at IS NULL AND p.exit_code IS NULL AND p.exited_at IS NULL)"
)
# Every heartbeat and every answer to a batch of reports reads this: written out, where the
# ORM spent longer building it than PostgreSQL took to run it. A rank's world is its attempt's
# placements (rank 0's host is the master); a retry is held while an earlier attempt of its
# job still has a rank open on a host that is not LOST. The newest placement is found by
# MAX(id), which PostgreSQL reads off the primary key's end.
PLACEMENT_ROWS_SQL = f"""
    SELECT {_WANTED} AS wanted, p.id, a.job_id, a.number, p.rank, p.gpu_indices, j.command,
        q.preemption_grace_seconds,
        EXISTS (
            SELECT 1 FROM quotas_jobattempt ea
            JOIN hosts_placement ep ON ep.attempt_id = ea.id
            JOIN hosts_gpuhost eh ON eh.id = ep.host_id
            WHERE ea.job_id = a.job_id AND ea.number < a.number
              AND ep.exit_code IS NULL AND ep.exited_at IS NULL AND eh.state <> '{HostState.LOST}'
        ) AS hold,
        (
            SELECT COALESCE(NULLIF(mh.address, ''), mh.name) FROM hosts_placement mp
            JOIN hosts_gpuhost mh ON mh.id = mp.host_id
            WHERE mp.attempt_id = p.attempt_id AND mp.rank = 0
        ) AS master,
        (SELECT COUNT(*) FROM hosts_placement wp WHERE wp.attempt_id = p.attempt_id) AS world,
        j.status, j.array_index
    FROM hosts_placement p
    JOIN quotas_jobattempt a ON a.id = p.attempt_id
    JOIN quotas_job j ON j.id = a.job_id
    JOIN quotas_jobqueue q ON q.id = j.job_queue_id
    WHERE p.host_id = %s
      AND ({_WANTED} OR p.id = (SELECT MAX(n.id) FROM hosts_placement n WHERE n.host_id = %s))
    ORDER BY p.attempt_id, p.rank
"""


def _placement_rows(host: GpuHost) -> list[tuple]:
    """The host's open placements (`wanted`), and its newest placement, wanted or not: its
    id is the horizon. Only the columns an answer sends, with each rank's world (its rank
    0's host, how many ranks) and whether it is held back."""
    with connection.cursor() as cursor:
        cursor.execute(PLACEMENT_ROWS_SQL, [host.pk, host.pk])
        return [_typed(*row) for row in cursor.fetchall()]


def _typed(
    wanted, pk, job, number, rank, gpus, command, grace, hold, master, world, status, index
) -> tuple:
    """A raw row's values as the ORM would give them: JSON arrives as text (and on SQLite
    booleans as 0/1, a UUID as its 32 hex digits)."""
    job = job if isinstance(job, uuid.UUID) else uuid.UUID(job)
    gpus = json.loads(gpus)
    hold = bool(hold)
    return (
        bool(wanted),
        pk,
        job,
        number,
        rank,
        gpus,
        command,
        grace,
        hold,
        master,
        world,
        status,
        index,
    )


MAX_WAIT_SECONDS = 20.0
# What one slot adds to an answer at most: it lists one rank per slot (a slot's GPUs hold one
# rank until it has exited), whose command is at most MAX_COMMAND_BYTES, 6 JSON bytes per
# byte at worst (a control character's \u escape), and under 1 KiB of the rest. A host has at
# most MAX_HOST_GPUS GPUs, so an answer is never over 256 × 385 KiB, and 8 slots' ≈ 3 MiB.
ANSWER_BYTES_PER_SLOT = 6 * MAX_COMMAND_BYTES + 1024
MAX_HOST_GPUS = 256


def heartbeat(
    token: AgentToken,
    name: str,
    running: list[int] | None = None,
    *,
    wait: float = 0.0,
    known: str | None = None,
    heard_up_to: int | None = None,
) -> dict:
    """What should run on the host, its version, and the lease: how long the agent may go
    unheard.

    `running` lists the placements the agent runs now, still has reports to send about, or
    may yet start (placed there and waiting for GPUs). A rank whose attempt ended before the
    agent ever started it (preempted or terminated at once) gets no exit report; the agent's
    word that it is done with it closes it, so it never holds back its job's retry. With
    `heard_up_to` (the newest placement the agent's answers had covered when it sent this)
    only those it had heard of are closed: a newer one may be on its way to it, on a report's
    answer, and start there after this.

    Long-poll: with `wait` seconds and the `known` version of its last answer, the answer
    comes as soon as what should run differs from that version (woken by the tick or the
    service that changed it), or when the wait is over, whichever is first.
    """
    host = host_of(token, name)
    env_id = host.service_environment_id
    mark = wakeups.generation(env_id)  # before reading: a change after this read wakes us
    was_lost = host.state == HostState.LOST
    now = timezone.now()
    GpuHost.objects.filter(pk=host.pk).update(last_heartbeat=now)
    if was_lost:
        # A lost host keeps nothing: its jobs were failed over. It must register again.
        raise InvalidInput({"name": f"host {name} was marked LOST; register it again"})
    if running is not None:
        ended = Placement.objects.filter(
            host=host, exited_at__isnull=True, attempt__stopped_at__isnull=False
        ).exclude(pk__in=running)
        if heard_up_to is not None:
            ended = ended.filter(pk__lte=heard_up_to)
        not_running = list(
            ended.select_related("attempt").only(
                "id", "attempt__id", "attempt__job_id", "attempt__preempted"
            )
        )
        if not_running and close_still_open([p.pk for p in not_running], now):
            # A preempted rank the agent never started: its preemption is over too.
            record_preemptions_over({p.attempt: now for p in not_running})
            wake_held_retries(env_id, [p.attempt.job_id for p in not_running])
    work = host_work(host)
    # Never so long that the host's own timeout could pass while it waits here.
    wait = min(max(wait, 0.0), MAX_WAIT_SECONDS, settings.QP_HOST_TIMEOUT / 3)
    if wait > 0 and _known(host, work, known):
        work = _wait_for_change(host, env_id, mark, work, known, wait, token)
    return work


def _wait_for_change(host, env_id, mark, work, known, wait, token) -> dict:
    """Long-poll in one of the process's few waiting slots (long_polls); with none free,
    answer at once and tell the agent when to ask again."""
    waiter = long_polls.take_slot((token.pk, host.pk))
    if waiter is None:
        return {**work, "poll_after": long_polls.POLL_AFTER_SECONDS}
    try:
        deadline = time.monotonic() + wait
        while _known(host, work, known) and (left := deadline - time.monotonic()) > 0:
            if not wakeups.wait_for(env_id, mark, left, lambda: waiter.superseded):
                break
            mark = wakeups.generation(env_id)
            work = host_work(host)
    finally:
        long_polls.release(waiter)
    GpuHost.objects.filter(pk=host.pk).update(last_heartbeat=timezone.now())
    return work


def _known(host: GpuHost, work: dict, known: str | None) -> bool:
    """Does the agent know this work already: from its last heartbeat's answer (`known`), or
    from the answer to its last batch of reports, which ticked at once? A long-poll woken by
    that very tick waits on, instead of answering what the agent has just been told."""
    return work["version"] in (known, delivered_version(host.pk))


DELIVERED_SECONDS = 2 * MAX_WAIT_SECONDS  # past any long-poll that could still be waiting
_delivered: dict[int, str] = {}  # host id -> version, in this process when there is no Redis


def remember_delivered(host_id: int, version: str) -> None:
    """A report's answer told the host what should run there (`version`)."""
    if not settings.REDIS_URL:
        _delivered[host_id] = version
        return
    try:
        redis_client.client(settings.REDIS_URL).set(
            _delivered_key(host_id), version, ex=int(DELIVERED_SECONDS)
        )
    except Exception:  # Redis's errors vary; the heartbeat then answers once more, no harm
        log.warning("could not note the work told to host %s", host_id, exc_info=True)


def delivered_version(host_id: int) -> str | None:
    if not settings.REDIS_URL:
        return _delivered.get(host_id)
    try:
        found = redis_client.client(settings.REDIS_URL).get(_delivered_key(host_id))
    except Exception:
        return None
    return found.decode() if found is not None else None


def _delivered_key(host_id: int) -> str:
    return redis_client.key(f"work-told:{host_id}")


def host_work(host: GpuHost) -> dict:
    """What should run on the host (`placements`, their `version`), the lease, and the
    `horizon`: the newest placement of the host this answer knows of.

    Heartbeats and report answers reach an agent on two paths, so an older answer can arrive
    after a newer one. The agent stops a job only on an answer whose horizon covers the job's
    placement: an answer read before that placement existed cannot tell it to stop. A
    placement goes only forward (held back, free to start, ended), so an answer that covers
    one and leaves it out says it has ended for good. The horizon and the placements are read
    by one statement, from one snapshot, so every placement up to it is seen.
    """
    desired, horizon, handed = desired_placements(host)
    if handed:  # on their way to the host, which launches them: STARTING, as AWS says
        mark_starting(handed)
    return {
        "placements": desired,
        "version": placements_version(desired),
        "horizon": horizon,
        "lease_seconds": settings.QP_HOST_TIMEOUT,
    }


def placements_version(desired: list[dict]) -> str:
    """Placements never change once made, so their ids say what should run, with the one
    change a placement does go through: from held back to free to start."""
    ids = ",".join(
        f"{p['placement']}{'h' if p.get('hold') else ''}"
        for p in sorted(desired, key=lambda p: p["placement"])
    )
    return hashlib.sha1(ids.encode()).hexdigest()[:16]
