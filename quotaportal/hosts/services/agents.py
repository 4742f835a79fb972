"""The agent protocol's writes: a host registers, heartbeats (answered with what should
run) and reports starts, output and exits."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Max, OuterRef, Prefetch
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, HostState, Placement
from quotaportal.hosts.services.fleet import HOST_LOST, capacity_changed, close_placements
from quotaportal.hosts.services.tokens import check_host_name
from quotaportal.quotas import wakeups
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.locks import lock_environment
from quotaportal.quotas.models import (
    DISPATCHED,
    CapacityUnit,
    Job,
)
from quotaportal.quotas.services import ticks
from quotaportal.quotas.services.lifecycle import (
    end_attempt,
    mark_started,
    mark_started_in_bulk,
    succeed_in_bulk,
)
from quotaportal.quotas.services.tick import tick_inline


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


MAX_WAIT_SECONDS = 20.0


def heartbeat(
    token: AgentToken,
    name: str,
    running: list[int] | None = None,
    *,
    wait: float = 0.0,
    known: str | None = None,
) -> dict:
    """What should run on the host, its version, and the lease: how long the agent may go
    unheard.

    `running` lists the placements the agent runs now. A rank whose attempt ended before the
    agent ever started it (preempted or terminated at once) gets no exit report; the agent's
    word that it does not run it closes it, so it never holds back its job's retry.

    Long-poll: with `wait` seconds and the `known` version of its last answer, the answer
    comes as soon as what should run differs from that version (woken by the tick or the
    service that changed it), or when the wait is over, whichever is first.
    """
    host = _host(token, name)
    env_id = host.service_environment_id
    mark = wakeups.generation(env_id)  # before reading: a change after this read wakes us
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
    work = host_work(host)
    # Never so long that the host's own timeout could pass while it waits here.
    wait = min(max(wait, 0.0), MAX_WAIT_SECONDS, settings.QP_HOST_TIMEOUT / 3)
    deadline = time.monotonic() + wait
    while work["version"] == known and (left := deadline - time.monotonic()) > 0:
        if not wakeups.wait_for(env_id, mark, left):
            break
        mark = wakeups.generation(env_id)
        work = host_work(host)
    if wait > 0:
        GpuHost.objects.filter(pk=host.pk).update(last_heartbeat=timezone.now())
    return work


def host_work(host: GpuHost) -> dict:
    """What should run on the host (`placements`, their `version`), the lease, and the
    `horizon`: the newest placement of the host this answer knows of.

    Heartbeats and report answers reach an agent on two paths, so an older answer can arrive
    after a newer one. The agent stops a job only on an answer whose horizon covers the job's
    placement: an answer read before that placement existed cannot tell it to stop. The
    horizon is read first; a host's placements are made by its environment's ticks, one
    after another, so every placement up to it is seen by the read that follows.
    """
    horizon = Placement.objects.filter(host=host).aggregate(newest=Max("id"))["newest"] or 0
    desired = desired_placements(host)
    return {
        "placements": desired,
        "version": placements_version(desired),
        "horizon": horizon,
        "lease_seconds": settings.QP_HOST_TIMEOUT,
    }


def placements_version(desired: list[dict]) -> str:
    """Placements never change once made, so their ids say what should run."""
    ids = ",".join(str(p["placement"]) for p in sorted(desired, key=lambda p: p["placement"]))
    return hashlib.sha1(ids.encode()).hexdigest()[:16]


def report(token: AgentToken, name: str, **fields) -> None:
    """An agent reports a rank started, its output, or its exit. Stale reports change nothing.

    Only the host that holds the placement may report on it. `reason` on an exit explains an
    end that is not the job's own doing (it could not start, its agent lost contact).
    """
    with transaction.atomic():
        _report(_host(token, name), **fields)


@dataclass
class Batch:
    """A batch of reports applied: per report None or what was wrong with it, and, when the
    batch freed capacity and its environment ticked at once, what should run on the host."""

    errors: list[str | None]
    work: dict | None = None


def report_many(token: AgentToken, name: str, reports: list[dict]) -> Batch:
    """Several reports of one host, in order.

    In one transaction (one commit, where each report on its own cost one), each report in a
    savepoint so a stale one is refused alone. A batch ends several jobs, locking their rows
    and their queue's, so it first takes the environment's tick lock, as a tick does: the two
    never hold each other's rows. If a tick keeps it too long, each report commits alone.

    Holding that lock, the batch ticks the environment itself when its reports freed capacity
    (ticks.ticking_inline), and its answer carries the host's new work: the agent starts the
    next job without waiting for a worker's tick and then a heartbeat's answer.
    """
    host = _host(token, name)
    env_id = host.service_environment_id
    errors, ticked = None, False
    with transaction.atomic():
        if lock_environment(env_id, BATCH_LOCK_SECONDS):
            with ticks.ticking_inline(env_id) as scope:
                errors = _apply_batch(host, reports)
            ticked = tick_inline(scope)
    if errors is None:  # a tick kept the lock: each report commits alone
        return Batch([_refusal(host, fields) for fields in reports])
    # Read once the tick has committed: the agent may start these at once.
    return Batch(errors, host_work(host) if ticked else None)


BATCH_LOCK_SECONDS = 2.0


PHASES = {"started": 0, "output": 1, "exited": 2}


def _apply_batch(host: GpuHost, reports: list[dict]) -> list[str | None]:
    """A batch's reports in a few statements, not a dozen per report: all its starts, then
    its output, then its exits. That is the order each placement's own reports come in; a
    batch that says otherwise about one placement is applied report by report."""
    last_phase: dict[int, int] = {}
    for fields in reports:
        phase = PHASES.get(fields["event"])
        if phase is None or phase < last_phase.get(fields["placement"], 0):
            return [_refusal(host, fields) for fields in reports]
        last_phase[fields["placement"]] = phase
    found = {
        p.id: p
        for p in Placement.objects.select_for_update(of=("self",))
        .select_related("attempt")
        .only("id", "started_at", "exited_at", "attempt__stopped_at", "attempt__job_id")
        .filter(pk__in=list(last_phase), host=host)
    }
    now = timezone.now()
    by_event = {event: [] for event in PHASES}
    errors = []
    for fields in reports:
        if fields["placement"] in found:
            by_event[fields["event"]].append(fields)
            errors.append(None)
        else:
            errors.append(f"placement: placement {fields['placement']} is not on host {host.name}")
    _apply_starts(found, [fields["placement"] for fields in by_event["started"]], now)
    for fields in by_event["output"]:
        Placement.objects.filter(pk=fields["placement"], exited_at__isnull=True).update(
            output_tail=fields.get("output_tail", "")[-8000:]
        )
    _apply_exits(found, by_event["exited"], now)
    return errors


def _apply_starts(found: dict[int, Placement], placements: list[int], now) -> None:
    if not placements:
        return
    Placement.objects.filter(pk__in=placements, started_at__isnull=True).update(started_at=now)
    live = {found[p].attempt.job_id for p in placements if found[p].attempt.stopped_at is None}
    mark_started_in_bulk(live, now)


def _apply_exits(found: dict[int, Placement], exits: list[dict], now) -> None:
    """Close the placements; end each attempt whose last running rank this was (succeeded
    when every rank exited 0), or the first failure of a rank ends it at once."""
    closing = {}
    for fields in exits:
        placement = found[fields["placement"]]
        if placement.exited_at is None and placement.id not in closing:
            placement.exit_code, placement.exited_at = fields.get("exit_code"), now
            placement.output_tail = fields.get("output_tail", "")[-8000:]
            closing[placement.id] = (placement, fields)
    if not closing:
        return
    Placement.objects.bulk_update(
        [placement for placement, _ in closing.values()],
        ["exit_code", "exited_at", "output_tail"],
    )
    ending = {
        placement.attempt_id: placement.attempt.job_id
        for placement, _ in closing.values()
        if placement.attempt.stopped_at is None
    }
    still_running = set(
        Placement.objects.filter(attempt_id__in=ending, exited_at__isnull=True).values_list(
            "attempt_id", flat=True
        )
    )
    failed = {}
    for placement, fields in closing.values():
        code, reason = fields.get("exit_code"), fields.get("reason", "")
        if placement.attempt_id in ending and (reason or code != 0):
            failed.setdefault(placement.attempt_id, (code, reason))
    for attempt_id, (code, reason) in failed.items():
        end_attempt(
            Job.objects.get(pk=ending[attempt_id]),
            succeeded=False,
            status_reason=reason or f"Exited with code {code}",
            exit_code=code,
            now=now,
            announce=attempt_id in still_running,  # the job's other ranks must stop
        )
    done = [
        job
        for attempt, job in ending.items()
        if attempt not in failed and attempt not in still_running
    ]
    if done:
        succeed_in_bulk(done, "Completed", now, announce=False)


def _refusal(host: GpuHost, fields: dict) -> str | None:
    try:
        with transaction.atomic():
            _report(host, **fields)
    except InvalidInput as err:
        return err.message
    return None


def _report(
    host: GpuHost,
    *,
    placement: int,
    event: str,
    exit_code: int | None = None,
    output_tail: str = "",
    reason: str = "",
) -> None:
    name = host.name
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
    # Other ranks still running must be stopped (a failure) or waited for (a success).
    others_running = found.attempt.placements.filter(exited_at__isnull=True).exists()
    if reason or exit_code != 0:
        end_attempt(
            job,
            succeeded=False,
            status_reason=reason or f"Exited with code {exit_code}",
            exit_code=exit_code,
            announce=others_running,
        )
    elif not others_running:
        end_attempt(job, succeeded=True, status_reason="Completed", exit_code=0, announce=False)
