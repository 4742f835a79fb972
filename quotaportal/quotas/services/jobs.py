"""Submitting jobs, changing their priority, terminating them."""

from __future__ import annotations

import hashlib
import json

from django.db import IntegrityError, transaction
from django.utils import timezone

from quotaportal.quotas import bridge
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    ACTIVE,
    FINAL,
    CapacityUnit,
    EventKind,
    Job,
    JobQueue,
    JobStatus,
    State,
)
from quotaportal.quotas.permissions import require_job_access, require_share_member
from quotaportal.quotas.services.audit import record
from quotaportal.quotas.services.retries import check_evaluate_on_exit
from quotaportal.quotas.services.ticks import queue_changed
from scheduler.validation import priority_error, submission_error


def _fingerprint(fields: dict) -> str:
    canonical = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_numbers(fields: dict) -> dict[str, str]:
    errors = {}
    if error := priority_error(fields["scheduling_priority"]):
        errors["scheduling_priority"] = error
    checks = {
        "quantity": (1, None, "quantity must be a whole number of at least 1"),
        "retry_attempts": (1, 10, "retry_attempts must be between 1 and 10"),
        "preemption_retries_before_termination": (
            0,
            None,
            "preemption_retries_before_termination must be 0 or more",
        ),
        "attempt_duration_seconds": (1, None, "attempt_duration_seconds must be at least 1"),
    }
    for field, (low, high, message) in checks.items():
        value = fields[field]
        if value is None and field not in ("quantity", "retry_attempts"):
            continue
        if (
            not isinstance(value, int)
            or isinstance(value, bool)
            or value < low
            or (high and value > high)
        ):
            errors[field] = message
    simulated = fields["simulated_duration_seconds"]
    if simulated is not None and (not isinstance(simulated, int | float) or simulated < 0):
        errors["simulated_duration_seconds"] = "simulated_duration_seconds must be 0 or more"
    if not isinstance(fields["name"], str) or not 1 <= len(fields["name"]) <= 128:
        errors["name"] = "name must be 1 to 128 characters"
    if fields["client_token"] is not None and (
        not isinstance(fields["client_token"], str) or not 1 <= len(fields["client_token"]) <= 64
    ):
        errors["client_token"] = "client_token must be 1 to 64 characters"
    if error := check_evaluate_on_exit(fields["evaluate_on_exit"]):
        errors["evaluate_on_exit"] = error
    return errors


def submit_job(
    actor,
    *,
    job_queue: JobQueue,
    quota_share: str,
    capacity_unit: str,
    name: str,
    quantity: int = 1,
    scheduling_priority: int = 0,
    command: str = "",
    service_request_payload=None,
    retry_attempts: int = 1,
    evaluate_on_exit=None,
    preemption_retries_before_termination: int | None = None,
    attempt_duration_seconds: int | None = None,
    simulated_duration_seconds: float | None = None,
    client_token: str | None = None,
    tags: dict | None = None,
    now=None,
) -> Job:
    """Validate and queue a job as RUNNABLE; a repeated client_token returns the first job."""
    fields = {
        "job_queue": job_queue.name,
        "quota_share": quota_share,
        "capacity_unit": capacity_unit,
        "name": name,
        "quantity": quantity,
        "scheduling_priority": scheduling_priority,
        "command": command,
        "service_request_payload": service_request_payload,
        "retry_attempts": retry_attempts,
        "evaluate_on_exit": evaluate_on_exit or [],
        "preemption_retries_before_termination": preemption_retries_before_termination,
        "attempt_duration_seconds": attempt_duration_seconds,
        "simulated_duration_seconds": simulated_duration_seconds,
        "client_token": client_token,
        "tags": tags or {},
    }
    if errors := _check_numbers(fields):
        raise InvalidInput(errors)
    if job_queue.state != State.ENABLED:
        raise InvalidInput(
            {"job_queue": f"job queue {job_queue.name} is DISABLED and accepts no jobs"}
        )
    share = job_queue.quota_shares.select_related("team").filter(name=quota_share).first()
    if share is None:
        raise InvalidInput(
            {
                "quota_share": f"quota share {quota_share} does not exist"
                f" in job queue {job_queue.name}"
            }
        )
    require_share_member(actor, share)
    unit = CapacityUnit.objects.filter(name=capacity_unit).first()
    if unit is None:
        raise InvalidInput({"capacity_unit": f"capacity unit {capacity_unit} does not exist"})
    capacity = bridge.environment_limits(job_queue.service_environment)
    if error := submission_error(bridge.share_of(share), unit.name, quantity, capacity):
        raise InvalidInput({"quantity" if "needs" in error else "quota_share": error})
    fingerprint = _fingerprint(fields)
    if client_token is not None:
        existing = _same_request(job_queue, client_token, fingerprint)
        if existing is not None:
            return existing
    try:
        with transaction.atomic():
            job = Job.objects.create(
                name=name,
                job_queue=job_queue,
                quota_share=share,
                share_name=share.name,
                submitted_by=actor,
                capacity_unit=unit,
                quantity=quantity,
                scheduling_priority=scheduling_priority,
                command=command,
                service_request_payload=service_request_payload,
                retry_attempts=retry_attempts,
                evaluate_on_exit=fields["evaluate_on_exit"],
                preemption_retries_before_termination=preemption_retries_before_termination,
                attempt_duration_seconds=attempt_duration_seconds,
                simulated_duration_seconds=simulated_duration_seconds,
                client_token=client_token,
                request_fingerprint=fingerprint,
                tags=fields["tags"],
                status=JobStatus.RUNNABLE,
                created_at=now or timezone.now(),
            )
            record(
                actor,
                EventKind.SUBMITTED,
                job=job,
                share=share,
                when=job.created_at,
                quantity=quantity,
                capacity_unit=unit.name,
                scheduling_priority=scheduling_priority,
            )
    except IntegrityError:
        # A concurrent submit with the same client_token won the race: answer as it did.
        existing = _same_request(job_queue, client_token, fingerprint)
        if existing is None:
            raise
        return existing
    queue_changed(job_queue.pk)
    return job


def _same_request(job_queue: JobQueue, client_token: str, fingerprint: str) -> Job | None:
    existing = Job.objects.filter(job_queue=job_queue, client_token=client_token).first()
    if existing is not None and existing.request_fingerprint != fingerprint:
        raise Conflict(f"client_token {client_token} was already used for a different request")
    return existing


def set_priority(actor, job: Job, priority: int) -> Job:
    """Raise or lower a job's scheduling priority while it is not final (AWS UpdateServiceJob)."""
    require_job_access(actor, job)
    if error := priority_error(priority):
        raise InvalidInput({"scheduling_priority": error})
    with transaction.atomic():
        before = job.scheduling_priority
        changed = Job.objects.filter(pk=job.pk, status__in=ACTIVE).update(
            scheduling_priority=priority
        )
        if not changed:
            job.refresh_from_db(fields=["status"])
            raise Conflict(f"job {job.name} is {job.status}; its priority can no longer change")
        job.scheduling_priority = priority
        record(
            actor,
            EventKind.PRIORITY_CHANGED,
            job=job,
            share=job.quota_share,
            **{"from": before, "to": priority},
        )
    queue_changed(job.job_queue_id)
    return job


def terminate_job(actor, job: Job, reason: str, now=None) -> Job:
    """End a job as FAILED with `reason`, from any state that is not final."""
    require_job_access(actor, job)
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput({"reason": "give a reason for terminating the job"})
    now = now or timezone.now()
    with transaction.atomic():
        ended = (
            Job.objects.filter(pk=job.pk)
            .exclude(status__in=FINAL)
            .update(
                status=JobStatus.FAILED,
                status_reason=reason,
                stopped_at=now,
                is_terminated=True,
                pending_reason="",
            )
        )
        if not ended:
            job.refresh_from_db(fields=["status"])
            raise Conflict(f"job {job.name} is already {job.status}")
        job.attempts.filter(stopped_at__isnull=True).update(stopped_at=now, status_reason=reason)
        job.refresh_from_db()
        record(actor, EventKind.TERMINATED, job=job, share=job.quota_share, when=now, reason=reason)
    queue_changed(job.job_queue_id)
    return job
