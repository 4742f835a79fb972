"""What the soak reads back from the database after the load: how the jobs ran, and whether
any GPU held two placements at once."""

from __future__ import annotations

from datetime import UTC, datetime


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
