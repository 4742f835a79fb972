"""Each tick of a SLURM environment looks at its cluster once and brings the portal in line.

1. One look (cli.poll: every job slurmctld holds, every node). A look that fails is
   "Slurm unavailable", never "every job ended": the environment backs off (as the AWS
   sync does), the failure is audited, and the tick plans without starting or stopping
   anything (backend.accepts_work) until a look succeeds again.
2. Each Slurm job the portal started and has not seen end: RUNNING marks its job RUNNING
   (Slurm's start time); still PENDING past the cluster's pending_timeout_seconds, it is
   cancelled and its job waits in the portal again; ended, its attempt ends with what Slurm
   says (exit code, signal, time limit, node failure), or, for a victim, its preemption
   completes; forgotten by slurmctld, it ends as lost.
3. Stops (stop_what_ended): an attempt the portal closed (preempted, terminated, timed out)
   whose Slurm job still runs gets, for a preemption, the checkpoint signal first and
   scancel after the queue's grace period; otherwise scancel at once.
4. A Slurm job carrying the portal's comment that the portal has no record of (its submit's
   record was lost in a crash) is cancelled: nothing runs twice.
5. The capacity, the nodes and the foreign jobs seen are kept on SlurmState for the planner
   and the pages, which run no command.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction

from quotaportal.jobs.output import READ_LIMIT, append_output, stored_length
from quotaportal.jobs.transitions import (
    end_attempt,
    mark_started_in_bulk,
    preemptions_completed,
    return_unplaced,
    succeed_in_bulk,
)
from quotaportal.quotas.models import EventKind, Job
from quotaportal.quotas.services.connections import record_outcome
from quotaportal.slurm import cli
from quotaportal.slurm.capacity import (
    UnitMap,
    capacity_of,
    foreign_jobs,
    foreign_summary,
    node_summary,
)
from quotaportal.slurm.models import SlurmCluster, SlurmJob, SlurmState
from quotaportal.slurm.requests import attempt_of

log = logging.getLogger(__name__)
KINDS = (EventKind.SLURM_UNAVAILABLE, EventKind.SLURM_RECOVERED)
TAIL_CHARS = 8000
RUNNING_STATES = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "RESIZING"}
LOST = "Slurm no longer knows this job (it ended while the portal could not see it)"
REQUEUED_BY_SLURM = "Slurm put the job back in its queue after it had started: its run is over"


def access_of(cluster: SlurmCluster) -> cli.Access:
    return cli.Access(
        ssh_host=cluster.ssh_host,
        ssh_user=cluster.ssh_user,
        ssh_key=cluster.ssh_key,
        slurm_conf=cluster.slurm_conf,
        timeout=settings.QP_SLURM_COMMAND_SECONDS,
    )


class Calls:
    """Slurm commands one tick ran (kept on its SchedulerRun, as AWS calls are)."""

    def __init__(self) -> None:
        self.count = 0


def look(queue, now) -> int:
    """One look at the queue's cluster, once per tick of its environment; the commands run."""
    env = queue.service_environment
    state, _ = SlurmState.objects.get_or_create(environment=env)
    if state.polled_at == now or state.backing_off(now):
        return 0  # looked already this tick (another queue of it), or backing off
    calls = Calls()
    error = None
    try:
        cluster = SlurmCluster.objects.prefetch_related("units__capacity_unit").get(environment=env)
        calls.count += 2
        found = cli.poll(access_of(cluster))
        with transaction.atomic():
            reconcile(cluster, found, now, calls)
            observe(state, cluster, found, now)
    except SlurmCluster.DoesNotExist:
        error = "the environment has no Slurm cluster configured (its page in the console)"
    except cli.SlurmError as err:
        error = err.message
    record_outcome(state, now=now, calls=calls.count, error=error, queue=queue, kinds=KINDS)
    return calls.count


def reconcile(cluster: SlurmCluster, found: cli.Poll, now, calls: Calls) -> None:
    env_id = cluster.environment_id
    # Only what a look reads: a job's row carries its whole request, hundreds of them a tick.
    live = list(
        SlurmJob.objects.filter(environment_id=env_id, ended_at__isnull=True)
        .select_related("attempt")
        .only(*LIVE_COLUMNS)
    )
    changed, started = [], {}
    for slurm_job in live:
        seen = found.jobs.get(slurm_job.slurm_job_id)
        if seen is not None and attempt_of(seen.comment, env_id) != slurm_job.attempt_id:
            seen = None  # the id is another job's now (slurmctld lost ours in a crash)
        if seen is None:
            _forgotten(slurm_job, now)
        elif seen.ended:
            _ended(cluster, slurm_job, seen, now)
        elif _alive(cluster, slurm_job, seen, now, calls, started):
            changed.append(slurm_job)
    # In bulk: a look at a busy cluster sees hundreds of running jobs, most unchanged.
    SlurmJob.objects.bulk_update(changed, ALIVE_FIELDS)
    mark_started_in_bulk(started)
    still = [row for row in live if row.ended_at is None]
    stop_what_ended(cluster, now, calls, found, still)
    _cancel_orphans(cluster, found, calls, still)


ALIVE_FIELDS = ["state", "reason", "node_list", "output_path", "output_tail", "started_at"]
LIVE_COLUMNS = [
    *ALIVE_FIELDS,
    "environment_id",
    "slurm_job_id",
    "submitted_at",
    "signalled_at",
    "cancelled_at",
    "ended_at",
    "exit_code",
    "attempt__job_id",
    "attempt__number",
    "attempt__stopped_at",
    "attempt__preempted",
]


def _alive(cluster, slurm_job: SlurmJob, seen: cli.Job, now, calls, started: dict) -> bool:
    """A job Slurm still holds: what changed is noted (True when the row must be written),
    a start goes to `started` (job id -> when); one held pending too long, or pending again
    after it ran, is dealt with at once."""
    attempt = slurm_job.attempt
    if seen.state == "PENDING" and attempt.stopped_at is None:
        if slurm_job.started_at is not None:
            _lost_its_run(cluster, slurm_job, now, calls)
            return False
        if (now - slurm_job.submitted_at).total_seconds() >= cluster.pending_timeout_seconds:
            _hand_back(cluster, slurm_job, seen, now, calls)
            return False
    before = [getattr(slurm_job, name) for name in ALIVE_FIELDS]
    slurm_job.state, slurm_job.reason = seen.state, seen.reason[:255]
    slurm_job.node_list, slurm_job.output_path = seen.node_list[:1024], seen.stdout[:1024]
    slurm_job.output_tail = _tail(cluster, seen.stdout) or slurm_job.output_tail
    _ship_output(cluster, slurm_job, seen.stdout, final=False)
    if seen.state in RUNNING_STATES and slurm_job.started_at is None:
        slurm_job.started_at = seen.start or now
        if attempt.stopped_at is None:
            started[attempt.job_id] = slurm_job.started_at
    return before != [getattr(slurm_job, name) for name in ALIVE_FIELDS]


def _lost_its_run(cluster, slurm_job: SlurmJob, now, calls: Calls) -> None:
    """It ran, and Slurm holds it pending again (slurmctld restarted without its run): that
    run is over; a retry, if any is left, starts as a new Slurm job."""
    calls.count += 1
    cli.cancel(access_of(cluster), [slurm_job.slurm_job_id])
    slurm_job.cancelled_at = slurm_job.ended_at = now
    slurm_job.save(update_fields=["cancelled_at", "ended_at"])
    job = Job.objects.get(pk=slurm_job.attempt.job_id)
    end_attempt(job, succeeded=False, status_reason=REQUEUED_BY_SLURM, now=now)


def _hand_back(cluster, slurm_job: SlurmJob, seen: cli.Job, now, calls: Calls) -> None:
    """Slurm held a job the plan started pending past the cluster's limit: cancelled there, it
    waits in the portal again (its attempt, and this record with it, undone)."""
    calls.count += 1
    cli.cancel(access_of(cluster), [slurm_job.slurm_job_id])
    waited = (now - slurm_job.submitted_at).total_seconds()
    reason = (
        f"Slurm held it pending for {waited:.0f} s ({seen.reason}); "
        "cancelled there, it waits in the portal again"
    )
    return_unplaced([str(slurm_job.attempt.job_id)], reason[:1024])
    slurm_job.ended_at = now  # its row went with its attempt: no stop left to send for it


def _ended(cluster: SlurmCluster, slurm_job: SlurmJob, seen: cli.Job, now) -> None:
    ended_at = min(seen.end or now, now)
    slurm_job.state, slurm_job.reason, slurm_job.ended_at = seen.state, seen.reason[:255], ended_at
    slurm_job.exit_code = seen.exit_code
    slurm_job.node_list = seen.node_list[:1024] or slurm_job.node_list
    slurm_job.output_path = seen.stdout[:1024] or slurm_job.output_path
    slurm_job.output_tail = _tail(cluster, seen.stdout) or slurm_job.output_tail
    slurm_job.save()
    _ship_output(cluster, slurm_job, slurm_job.output_path, final=True)
    _attempt_over(slurm_job, ended_at, seen)


def _forgotten(slurm_job: SlurmJob, now) -> None:
    slurm_job.state, slurm_job.ended_at = "UNKNOWN", now
    slurm_job.save(update_fields=["state", "ended_at"])
    _attempt_over(slurm_job, now, None)


def _attempt_over(slurm_job: SlurmJob, ended_at, seen: cli.Job | None) -> None:
    """The Slurm job is over: a preempted attempt's preemption completes; an attempt still
    open ends as Slurm says; one the portal closed (terminated, timed out) is over already."""
    attempt = slurm_job.attempt
    if attempt.preempted:
        preemptions_completed({attempt.job_id: ended_at})
    elif attempt.stopped_at is None:
        if seen is not None and seen.state == "COMPLETED" and seen.exit_code == 0:
            succeed_in_bulk([attempt.job_id], "Completed", ended_at)
        else:
            code = seen.exit_code if seen is not None else None
            job = Job.objects.get(pk=attempt.job_id)
            end_attempt(job, succeeded=False, status_reason=why(seen), exit_code=code, now=ended_at)


def why(seen: cli.Job | None) -> str:
    """Why a Slurm job ended without success, in words."""
    if seen is None:
        return LOST
    if seen.state == "FAILED" and seen.signal:
        return f"Killed by signal {seen.signal}"
    if seen.state == "FAILED":
        return f"Exited with code {seen.exit_code}"
    named = {
        "TIMEOUT": "Slurm's time limit was reached",
        "CANCELLED": "Cancelled in Slurm, not by the portal",
        "NODE_FAIL": f"A node failed in Slurm ({seen.node_list})",
        "OUT_OF_MEMORY": "Out of memory",
        "BOOT_FAIL": "A node failed to boot in Slurm",
        "PREEMPTED": "Preempted by Slurm itself (not the portal)",
        "DEADLINE": "Slurm's deadline passed",
    }
    return named.get(seen.state, f"Slurm ended it: {seen.state}")


def stop_what_ended(
    cluster: SlurmCluster,
    now,
    calls: Calls,
    found: cli.Poll | None = None,
    live: list[SlurmJob] | None = None,
) -> None:
    """Slurm jobs whose attempts the portal closed: the checkpoint signal for a preempted
    one, then scancel after its queue's grace period; scancel at once for the rest (and for
    one Slurm never started). `live`: the environment's Slurm jobs not over, when the caller
    read them already."""
    if live is None:
        live = list(
            SlurmJob.objects.filter(
                environment_id=cluster.environment_id,
                ended_at__isnull=True,
                attempt__stopped_at__isnull=False,
            ).select_related("attempt")
        )
    stopping = [
        row for row in live if row.cancelled_at is None and row.attempt.stopped_at is not None
    ]
    graces = _graces([row.attempt.job_id for row in stopping])
    access = access_of(cluster)
    for slurm_job in stopping:
        attempt = slurm_job.attempt
        seen = found.jobs.get(slurm_job.slurm_job_id) if found else None
        started = slurm_job.started_at is not None or (seen is not None and seen.state != "PENDING")
        grace = timedelta(seconds=graces[attempt.job_id])
        if attempt.preempted and started and slurm_job.signalled_at is None:
            calls.count += 1
            cli.signal(access, slurm_job.slurm_job_id, cluster.checkpoint_signal)
            slurm_job.signalled_at = now
            slurm_job.save(update_fields=["signalled_at"])
        elif not attempt.preempted or not started or now >= slurm_job.signalled_at + grace:
            calls.count += 1
            cli.cancel(access, [slurm_job.slurm_job_id])
            slurm_job.cancelled_at = now
            slurm_job.save(update_fields=["cancelled_at"])


def _graces(job_ids: list) -> dict:
    """Each job's queue's grace period, seconds."""
    if not job_ids:
        return {}
    return dict(
        Job.objects.filter(pk__in=job_ids).values_list("id", "job_queue__preemption_grace_seconds")
    )


def _cancel_orphans(
    cluster: SlurmCluster, found: cli.Poll, calls: Calls, live: list[SlurmJob]
) -> None:
    env_id = cluster.environment_id
    carrying = {
        (job_id, attempt)
        for job_id, job in found.jobs.items()
        if not job.ended and (attempt := attempt_of(job.comment, env_id)) is not None
    }
    recorded = {(row.slurm_job_id, row.attempt_id) for row in live}
    orphans = sorted(job_id for job_id, _ in carrying - recorded)
    if orphans:
        log.warning("Slurm jobs %s carry the portal's mark but no record: cancelled", orphans)
        calls.count += 1
        cli.cancel(access_of(cluster), orphans)


def observe(state: SlurmState, cluster: SlurmCluster, found: cli.Poll, now) -> None:
    units = {
        u.capacity_unit.name: UnitMap(
            u.partition, u.gpu_type, u.constraint, u.capacity_unit.gpus_per_unit
        )
        for u in cluster.units.all()
    }
    ours = _portal_job_ids(cluster, found)
    state.polled_at = now
    state.capacity = capacity_of(found, units, ours)
    state.nodes = [node_summary(node) for node in sorted(found.nodes, key=lambda n: n.name)]
    state.foreign = [foreign_summary(job) for job in foreign_jobs(found, ours)]
    # Saved with the look's outcome (record_outcome), in one write.


def _portal_job_ids(cluster: SlurmCluster, found: cli.Poll) -> set[str]:
    """The jobs the portal started: its comment on them (recorded or not: an orphan is
    being cancelled, and its GPUs are the portal's to count)."""
    env_id = cluster.environment_id
    return {job_id for job_id, job in found.jobs.items() if attempt_of(job.comment, env_id)}


def _tail(cluster: SlurmCluster, path: str) -> str:
    """The end of the job's output, when the portal's machine can read the file (Slurm's
    commands run here); "" otherwise."""
    if cluster.ssh_host or not path or path == "/dev/null":
        return ""
    try:
        with Path(path).open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_CHARS))
            return handle.read().decode(errors="replace")[-TAIL_CHARS:]
    except OSError:
        return ""


SHIP_PER_LOOK = 8 * 1024 * 1024  # bytes of a job's output stored per look, at most


def _ship_output(cluster: SlurmCluster, slurm_job: SlurmJob, path: str, final: bool) -> None:
    """The job's whole output (one file for all its ranks, stored as rank 0), from where the
    stored copy ends, when the portal's machine can read the file; marked final once the job
    ended and all of it is stored."""
    if cluster.ssh_host or not path or path == "/dev/null" or slurm_job.attempt_id is None:
        return
    try:
        with Path(path).open("rb") as handle:
            offset = stored_length(slurm_job.attempt_id, 0)
            handle.seek(offset)
            for _ in range(SHIP_PER_LOOK // READ_LIMIT):
                data = handle.read(READ_LIMIT)
                last = len(data) < READ_LIMIT
                stored = append_output(slurm_job.attempt_id, 0, offset, data, final and last)
                offset = stored.next_offset
                if last or stored.full:
                    return
    except OSError:
        return


def next_deadline(env, now):
    """When a tick is next due by itself: a stop to send (at once), a victim's grace period
    running out, a job held pending past the cluster's limit; after a backoff, its end."""
    state = SlurmState.objects.filter(environment=env).first()
    if state is not None and state.backing_off(now):
        return state.backoff_until  # nothing can be sent before then
    pending_limit = (
        SlurmCluster.objects.filter(environment=env)
        .values_list("pending_timeout_seconds", flat=True)
        .first()
    )
    rows = SlurmJob.objects.filter(environment=env, ended_at__isnull=True).values_list(
        "submitted_at",
        "started_at",
        "signalled_at",
        "cancelled_at",
        "attempt__stopped_at",
        "attempt__job__job_queue__preemption_grace_seconds",
    )
    deadlines = []
    for submitted, started, signalled, cancelled, stopped, grace in rows:
        if stopped is not None and cancelled is None:
            if signalled is None:
                return now  # a stop to send
            deadlines.append(signalled + timedelta(seconds=grace))
        elif stopped is None and started is None and pending_limit is not None:
            deadlines.append(submitted + timedelta(seconds=pending_limit))
    return min(deadlines, default=None)
