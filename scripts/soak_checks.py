"""What the soak reads back after the load: every job final and none lost, how the jobs ran,
whether any GPU held two placements at once or a job ran twice, and, after outages, whether
the worker outlived them and /healthz is healthy again."""

from __future__ import annotations

import os
import time
from collections import Counter
from datetime import UTC, datetime

from soak_chaos import healthz, say


def attempt_figures(stack) -> dict:
    """How the jobs ran: processes the ledger saw start, attempts lost with their host or
    preempted, jobs that needed more than one attempt."""
    from django.db.models import Count

    from quotaportal.quotas.models import Job, JobAttempt

    starts = stack.ledger / "starts"
    return {
        "job_processes_started": starts.read_text().count("\n") if starts.exists() else 0,
        "attempts_lost_with_their_host": JobAttempt.objects.filter(
            status_reason="Host lost"
        ).count(),
        "attempts_preempted": JobAttempt.objects.filter(preempted=True).count(),
        "jobs_with_more_than_one_attempt": (
            Job.objects.annotate(n=Count("attempts")).filter(n__gt=1).count()
        ),
    }


def gpu_overlaps() -> list[str]:
    """Placements that held one GPU of one host at overlapping times, from the agents' reports
    (a rank holds its GPUs from its start report to its exit report, or to the moment the
    server closed it when its host was lost or re-registered)."""
    from quotaportal.hosts.models import Placement

    by_gpu: dict[tuple, list] = {}
    rows = Placement.objects.filter(started_at__isnull=False).values_list(
        "host__name", "gpu_indices", "started_at", "exited_at", "attempt__job_id"
    )
    for host, gpus, started, exited, job in rows:
        for gpu in gpus:
            by_gpu.setdefault((host, gpu), []).append((started, exited, job))
    overlaps = []
    for (host, gpu), spans in by_gpu.items():
        # By start, then end: a rank closed the instant it started (a zero-length span)
        # shares that instant with the next one's start without overlapping it.
        spans.sort(key=lambda span: (span[0], span[1] or datetime.max.replace(tzinfo=UTC)))
        for (_, end_a, job_a), (start_b, _, job_b) in zip(spans, spans[1:], strict=False):
            if end_a is None or end_a > start_b:
                overlaps.append(f"{host} GPU {gpu}: job {job_a} and job {job_b}")
    return overlaps


def outage_checks(stack, outages) -> tuple[dict, dict]:
    """(figures, checks) after outages: both workers are alive and /healthz is healthy again
    (given a minute: its worker heartbeat and the ticks have to come round)."""
    deadline = time.monotonic() + 60
    while (status := healthz(stack.url)) != 200 and time.monotonic() < deadline:
        time.sleep(2)
    workers = [p for name, p in stack.processes.items() if name.startswith("worker")]
    worker_alive = all(process.poll() is None for process in workers)
    figures = {
        "outages": dict(outages.done),
        "unavailable_answers_during_outages": stack.api.unavailable_in_outages,
        "healthz_at_the_end": status,
    }
    return figures, {"worker_outlived_the_outages": worker_alive, "healthz_ok_after": status == 200}


def check(stack, load, started: float, drain_deadline: float, chaos, outages) -> dict:
    """Read the outcome from the database and the job locks; return the figures. `chaos` and
    `outages` are the threads that killed agents and took servers down (None: not run)."""
    names = ("DATABASE_URL", "REDIS_URL", "QP_DEBUG", "QP_SECRET_KEY", "DJANGO_SETTINGS_MODULE")
    os.environ.update({k: stack.env[k] for k in names})
    import django

    django.setup()
    from quotaportal.quotas.models import FINAL, Job

    drain(drain_deadline)
    jobs = dict(Job.objects.values_list("id", "status"))
    jobs = {str(k): v for k, v in jobs.items()}
    missing = sorted(load.accepted - set(jobs))
    unexpected = sorted(set(jobs) - load.accepted)
    not_final = [j for j, s in jobs.items() if s not in FINAL]
    capacity = stack.args.agents * stack.args.gpus
    shared_gpus = gpu_overlaps()
    violations_file = stack.ledger / "violations"
    violations = violations_file.read_text().splitlines() if violations_file.exists() else []
    status = Counter(jobs.values())
    outage_figures, outage_ok = outage_checks(stack, outages) if outages else ({}, {})
    return {
        "minutes": round((time.monotonic() - started) / 60, 2),
        "agents": stack.args.agents,
        "gpus": capacity,
        "client_threads": stack.args.threads,
        "requests": dict(stack.api.answers),
        "actions": dict(load.actions),
        "agent_kills": dict(chaos.kills) if chaos else {},
        "jobs_accepted": len(load.accepted),
        "jobs_by_status": dict(status),
        **attempt_figures(stack),
        "gpu_overlaps_in_the_database": len(shared_gpus),
        **outage_figures,
        "checks": {
            "no_job_lost": not missing and not unexpected,
            "every_job_final": not not_final,
            "no_job_ran_twice_and_no_gpu_shared": not violations,
            "capacity_never_exceeded": not shared_gpus and not violations,
            "no_5xx": not stack.api.server_errors,
            **outage_ok,
        },
        "details": {
            "missing": missing[:10],
            "unexpected": unexpected[:10],
            "not_final": not_final[:10],
            "violations": violations[:10],
            "gpu_overlaps": shared_gpus[:10],
            "server_errors": stack.api.server_errors[:10],
        },
    }


def drain(deadline: float) -> None:
    """Wait for every job to reach a final state, or for the deadline."""
    from quotaportal.quotas.models import FINAL, Job

    while time.monotonic() < deadline:
        open_jobs = Job.objects.exclude(status__in=FINAL).count()
        if open_jobs == 0:
            return
        say(f"draining: {open_jobs} job(s) not final yet")
        time.sleep(5)
