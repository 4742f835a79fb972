"""An agent's reports: a rank started, its output, its exit. Stale reports change nothing.

When: each report carries its `age`, the seconds between the event and the report's
sending, measured on the agent's own monotonic clock. The server dates the event at the
report's arrival (its request's, before the server authenticated and parsed it) less that
age, on its own clock: the real moment plus the time in transit, so never before it
happened, yet without the time the report waited behind others. Every placement time thus
stays on the server's clock (the ends it closes itself, for a lost host, are on it too), so
a GPU's placements never overlap: a job is placed on a GPU only after the exit that freed
it has arrived.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, OuterRef
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, Placement
from quotaportal.hosts.services.agents import host_of, host_work, remember_delivered
from quotaportal.hosts.services.fleet import record_preemptions_over, wake_held_retries
from quotaportal.infra.bulk import update_objects
from quotaportal.infra.locks import lock_environment
from quotaportal.infra.subqueries import per_outer_row
from quotaportal.jobs.output import Stored, append_output, mark_final_in_bulk
from quotaportal.jobs.transitions import (
    end_attempt,
    mark_started_in_bulk,
    succeed_in_bulk,
)
from quotaportal.quotas.audit import events_together
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import Job
from quotaportal.tick import changes
from quotaportal.tick.run import tick_held

BATCH_LOCK_SECONDS = 2.0
PHASES = {"started": 0, "output": 1, "exited": 2}
TAIL_CHARS = 8000


def report(token: AgentToken, name: str, *, received: datetime | None = None, **fields) -> None:
    """One report, which arrived at `received` (now when not said). Only the host that holds
    the placement may report on it. `reason` on an exit explains an end that is not the job's
    own doing (it could not start, its agent lost contact)."""
    received = received or timezone.now()
    with transaction.atomic():
        error = _apply_batch(host_of(token, name), [fields], received)[0]
    if error is not None:
        raise InvalidInput(error)


@dataclass
class Batch:
    """A batch of reports applied: per report None or what was wrong with it, and, when the
    batch freed capacity and its environment ticked at once, what should run on the host."""

    errors: list[str | None]
    work: dict | None = None


def report_many(
    token: AgentToken, name: str, reports: list[dict], *, received: datetime | None = None
) -> Batch:
    """Several reports of one host, in order, which arrived at `received` (now when not said).

    In one transaction (one commit, where each report on its own cost one), each report in a
    savepoint so a stale one is refused alone. A batch ends several jobs, locking their rows
    and their queue's, so it first takes the environment's tick lock, as a tick does: the two
    never hold each other's rows. If a tick keeps it too long, each report commits alone.

    Holding that lock, the batch ticks the environment itself when its reports freed capacity
    (changes.holding, run.tick_held), and its answer carries the host's new work: the agent
    starts the next job without waiting for a worker's tick and then a heartbeat's answer.
    """
    received = received or timezone.now()  # before any wait: the ages count from here
    host = host_of(token, name)
    env_id = host.service_environment_id
    errors, work = None, None
    with transaction.atomic():
        if lock_environment(env_id, BATCH_LOCK_SECONDS):
            with changes.holding(env_id) as held:
                with events_together():
                    errors = [_message(e) for e in _apply_batch(host, reports, received)]
                ticked = tick_held(held)
            if ticked:
                # Noted before the commit wakes the host's waiting heartbeat, which then
                # leaves this work to this answer (sent once the commit is done).
                work = host_work(host)
                remember_delivered(host.pk, work["version"])
                if held.preempted or _placed_elsewhere(work, held.started):
                    changes.environment_work_changed(env_id)
    if errors is None:  # a tick kept the lock: each report commits alone
        return Batch([_refusal(host, fields, received) for fields in reports])
    return Batch(errors, work)


def _placed_elsewhere(work: dict, job_ids: list[str]) -> bool:
    """Did any of these jobs, just dispatched, get a rank on another host (whose agent must
    be woken)? Read off the host's own work: a job with fewer ranks here than its world size
    has the others elsewhere."""
    ranks_here = Counter(p["job_id"] for p in work["placements"])
    sizes = {p["job_id"]: p["world_size"] for p in work["placements"]}
    return any(job not in sizes or ranks_here[job] < sizes[job] for job in job_ids)


def seen_at(received: datetime, fields: dict, *earliest: datetime | None) -> datetime:
    """When the agent saw the event: the arrival less its age, and never before any of
    `earliest` (what it must follow: its attempt's dispatch, its rank's start, the exit that
    freed its GPUs)."""
    at = received - timedelta(seconds=fields.get("age") or 0.0)
    return max(at, *(e for e in earliest if e is not None))


def gpus_freed_at(host: GpuHost, placements) -> dict[int, datetime]:
    """GPU index -> when an exit of another placement last freed it, for the exits since
    these placements' dispatch. A rank placed on GPUs a preempted rank still held starts once
    that one has exited, so its start is dated no earlier, whichever report arrived first."""
    since = min(p.attempt.started_at for p in placements)
    freed: dict[int, datetime] = {}
    others = Placement.objects.filter(host=host, exited_at__gte=since).exclude(
        pk__in=[p.pk for p in placements]
    )
    for gpus, exited in others.values_list("gpu_indices", "exited_at"):
        for gpu in gpus:
            freed[gpu] = max(freed.get(gpu, exited), exited)
    return freed


_open_ranks_of_attempt = per_outer_row(
    Placement.objects.filter(attempt_id=OuterRef("attempt_id"), exited_at__isnull=True),
    Count("id"),
    by="attempt_id",
)


def _apply_batch(host: GpuHost, reports: list[dict], received: datetime) -> list[str | None]:
    """A batch's reports in a few statements, not a dozen per report: all its starts, then
    its output, then its exits. That is the order each placement's own reports come in; a
    batch that says otherwise about one placement is applied report by report."""
    last_phase: dict[int, int] = {}
    for fields in reports:
        phase = PHASES.get(fields["event"], 0)
        if phase < last_phase.get(fields["placement"], 0):
            return [_refusal(host, fields, received) for fields in reports]
        last_phase[fields["placement"]] = phase
    found = {
        p.id: p
        for p in Placement.objects.select_for_update(of=("self",))
        .select_related("attempt")
        .only(
            "id",
            "rank",
            "gpu_indices",
            "started_at",
            "exited_at",
            "attempt__started_at",
            "attempt__stopped_at",
            "attempt__job_id",
            "attempt__preempted",
        )
        .filter(pk__in=list(last_phase), host=host)
        # Its attempt's ranks still open, on any host: an exit that leaves none ends it. The
        # environment lock keeps other hosts' batches from closing any meanwhile.
        .annotate(open_ranks=_open_ranks_of_attempt)
    }
    known = [f for f in reports if f["placement"] in found and f["event"] in PHASES]
    starts, exits = _dated(host, found, known, received)
    _apply_starts(found, starts)
    for fields in known:
        if fields["event"] == "output":
            Placement.objects.filter(pk=fields["placement"], exited_at__isnull=True).update(
                output_tail=fields.get("output_tail", "")[-TAIL_CHARS:]
            )
    _apply_exits(host, found, exits)
    return [_wrong(host, found, fields) for fields in reports]


def _wrong(host: GpuHost, found: dict, fields: dict) -> dict | None:
    """What is wrong with a report (field -> message), or None."""
    if fields["placement"] not in found:
        return {"placement": f"placement {fields['placement']} is not on host {host.name}"}
    if fields["event"] not in PHASES:
        return {"event": "event must be started, output or exited"}
    return None


def _dated(host: GpuHost, found: dict[int, Placement], reports: list[dict], received):
    """The batch's new starts (placement id -> when) and exits (placement id -> (when, the
    report)), dated in the order the agent saw them: an exit follows its rank's start, a
    start the exits that freed its GPUs."""
    starting = [found[f["placement"]] for f in reports if f["event"] == "started"]
    freed = gpus_freed_at(host, starting) if starting else {}
    starts, exits = {}, {}
    for fields in reports:
        placement = found[fields["placement"]]
        event = fields["event"]
        if event == "started" and placement.started_at is None and placement.id not in starts:
            at = seen_at(
                received,
                fields,
                placement.attempt.started_at,
                *(freed.get(gpu) for gpu in placement.gpu_indices),
            )
            # Closed already (its host re-registered meanwhile): it ran no later than that.
            starts[placement.id] = min(at, placement.exited_at or at)
        elif event == "exited" and placement.exited_at is None and placement.id not in exits:
            start = starts.get(placement.id, placement.started_at)
            at = seen_at(received, fields, start, placement.attempt.started_at)
            exits[placement.id] = (at, fields)
            for gpu in placement.gpu_indices:
                freed[gpu] = max(freed.get(gpu, at), at)
    return starts, exits


def _apply_starts(found: dict[int, Placement], starts: dict[int, datetime]) -> None:
    if not starts:
        return
    for placement_id, at in starts.items():
        found[placement_id].started_at = at
    update_objects([found[p] for p in starts], ["started_at"])
    mark_started_in_bulk(
        {
            found[p].attempt.job_id: at
            for p, at in starts.items()
            if found[p].attempt.stopped_at is None
        }
    )


def _apply_exits(host: GpuHost, found: dict[int, Placement], exits: dict[int, tuple]) -> None:
    """Close the placements; end each attempt whose last running rank this was (succeeded
    when every rank exited 0), or the first failure of a rank ends it at once."""
    if not exits:
        return
    closing = []
    for placement_id, (at, fields) in exits.items():
        placement = found[placement_id]
        placement.exit_code, placement.exited_at = fields.get("exit_code"), at
        placement.output_tail = fields.get("output_tail", "")[-TAIL_CHARS:]
        closing.append((placement, fields))
    update_objects(
        [placement for placement, _ in closing], ["exit_code", "exited_at", "output_tail"]
    )
    _mark_output_final(closing)
    record_preemptions_over({placement.attempt: placement.exited_at for placement, _ in closing})
    wake_held_retries(
        host.service_environment_id,
        [p.attempt.job_id for p, _ in closing if p.attempt.stopped_at is not None],
    )
    ending, ended_at = {}, {}
    for placement, _ in closing:
        if placement.attempt.stopped_at is None:
            job_id = ending[placement.attempt_id] = placement.attempt.job_id
            ended_at[job_id] = max(ended_at.get(job_id, placement.exited_at), placement.exited_at)
    closed_now = Counter(placement.attempt_id for placement, _ in closing)
    still_running = {
        placement.attempt_id
        for placement, _ in closing
        if placement.open_ranks > closed_now[placement.attempt_id]
    }
    failed = {}
    for placement, fields in closing:
        code, reason = fields.get("exit_code"), fields.get("reason", "")
        if placement.attempt_id in ending and (reason or code != 0):
            failed.setdefault(placement.attempt_id, (placement, code, reason))
    for attempt_id, (placement, code, reason) in failed.items():
        end_attempt(
            Job.objects.get(pk=ending[attempt_id]),
            succeeded=False,
            status_reason=reason or f"Exited with code {code}",
            exit_code=code,
            now=placement.exited_at,
        )
    if still_running & failed.keys():  # those jobs' other ranks must stop
        changes.environment_work_changed(host.service_environment_id)
    done = {
        job: ended_at[job]
        for attempt, job in ending.items()
        if attempt not in failed and attempt not in still_running
    }
    if done:
        last = max(done.values())
        succeed_in_bulk(list(done), "Completed", last, ended_at=done)


def _mark_output_final(closing: list[tuple[Placement, dict]]) -> None:
    """Exits whose whole output the agent had sent already carry where it ends: the final
    mark the shipper's last chunk would have brought, without a request of its own, all of
    the batch's in a few statements. An offset past what is stored is left alone (the
    output settles SETTLE_SECONDS after its end, as a lost host's does)."""
    ends = {
        (placement.attempt_id, placement.rank): (ends_at, placement.exited_at)  # the exit's
        for placement, fields in closing
        if (ends_at := fields.get("output_ends_at")) is not None
    }
    mark_final_in_bulk(Placement.objects.filter(pk__in=[p.pk for p, _ in closing]), ends)


def _refusal(host: GpuHost, fields: dict, received: datetime) -> str | None:
    """One report in a transaction of its own: None, or what was wrong with it."""
    with transaction.atomic():
        return _message(_apply_batch(host, [fields], received)[0])


def _message(error: dict | None) -> str | None:
    return None if error is None else InvalidInput(error).message


def ship_output(
    token: AgentToken, name: str, placement_id: int, offset: int, data: bytes, final: bool
) -> Stored:
    """A chunk of a rank's output from the host that runs it (jobs.output)."""
    host = host_of(token, name)
    placement = Placement.objects.filter(pk=placement_id, host=host).first()
    if placement is None:
        raise Forbidden(f"placement {placement_id} is not on host {name}")
    return append_output(placement.attempt_id, placement.rank, offset, data, final)
