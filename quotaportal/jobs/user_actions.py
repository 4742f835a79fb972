"""Submitting jobs, changing their priority, terminating them."""

from __future__ import annotations

import hashlib
import json

from django.db import IntegrityError, transaction
from django.utils import timezone

from quotaportal.infra.bulk import insert_new
from quotaportal.jobs.fields import (
    dependencies_of,
    field_errors,
)
from quotaportal.jobs.targets import queue_named, target
from quotaportal.quotas.audit import insert_events, record
from quotaportal.quotas.config_cache import cached_lookups
from quotaportal.quotas.errors import Conflict, InvalidInput, ServiceError
from quotaportal.quotas.models import (
    ACTIVE,
    FINAL,
    Event,
    EventKind,
    Job,
    JobQueue,
    JobStatus,
)
from quotaportal.quotas.permissions import (
    actor_name,
    require_job_access,
)
from quotaportal.tick.changes import (
    agents_must_hear,
    events_written,
    jobs_submitted,
    queue_changed,
)
from scheduler.validation import priority_error


def _fingerprint(fields: dict) -> str:
    canonical = json.dumps(fields, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


JOB_OPTIONS = {  # optional job fields and their defaults
    "quantity": 1,
    "scheduling_priority": 0,
    "command": "",
    "service_request_payload": None,
    "retry_attempts": 1,
    "evaluate_on_exit": None,
    "preemption_retries_before_termination": None,
    "attempt_duration_seconds": None,
    "simulated_duration_seconds": None,
    "client_token": None,
    "tags": None,
    "depends_on": None,
}


def submit_job(
    actor,
    *,
    job_queue: JobQueue | str,
    quota_share: str,
    capacity_unit: str,
    name: str,
    now=None,
    **options,
) -> Job:
    """Validate and queue a job as RUNNABLE; a repeated client_token returns the first job.

    `job_queue` is the queue or its name; `options` are the optional fields of JOB_OPTIONS
    (quantity, scheduling_priority, ...). Submits in real time (no `now` given) are checked
    against the lookups cached between requests (quotas.config_cache).
    """
    if unknown := sorted(set(options) - set(JOB_OPTIONS)):
        raise TypeError(f"submit_job() got unknown fields {unknown}")
    item = {
        "job_queue": job_queue,
        "quota_share": quota_share,
        "capacity_unit": capacity_unit,
        "name": name,
        **options,
    }
    cache = {} if now else cached_lookups()
    now = now or timezone.now()
    job_queue, share, unit, fields, fingerprint = _prepare(actor, item, cache=cache, now=now)
    token = fields["client_token"]
    if token is not None and (existing := _same_request(actor, job_queue, token, fingerprint)):
        return existing
    try:
        job = _create(actor, job_queue, share, unit, fields, fingerprint, now)
    except IntegrityError:
        # A concurrent submit with the same client_token won the race: answer as it did.
        existing = _same_request(actor, job_queue, token, fingerprint) if token else None
        if existing is None:
            raise
        return existing
    return job


@transaction.atomic
def _create(actor, job_queue, share, unit, fields: dict, fingerprint: str, now) -> Job:
    job = _new_job(actor, job_queue, share, unit, fields, fingerprint, now)
    job.save(force_insert=True)
    _submitted_event(actor, job, now).save(force_insert=True)
    events_written()
    jobs_submitted(job_queue.pk)
    return job


MAX_BATCH = 1000


def submit_jobs(
    actor,
    items: list[dict | None],
    now=None,
    lookups: dict | None = None,
    found: dict | None = None,
) -> list[Job]:
    """Submit many jobs at once (a sweep): each item is what submit_job takes (job_queue,
    quota_share, capacity_unit, name and the options). Every item is checked first; if any
    fails, nothing is created and InvalidInput names each failing item (`jobs[3].quantity`).
    Otherwise all are created in one transaction. An item whose client_token this submitter
    used before for the same request answers with that job, as submit_job does.

    `lookups` keeps the queue's shares, units and limits between batches: only for a caller
    that owns the queues meanwhile (a replay), since a share edited in between would be missed.
    Without it, a submit in real time (no `now`) uses the lookups cached between requests, which
    every change to those rows invalidates (quotas.config_cache).

    `found`: faults a caller found already in its own checks (`jobs[i].field` -> message),
    its items None there: they are reported with the others and nothing is created.
    """
    if not 1 <= len(items) <= MAX_BATCH:
        raise InvalidInput({"jobs": f"give 1 to {MAX_BATCH} jobs, got {len(items)}"})
    if lookups is None:
        lookups = {} if now else cached_lookups()
    now = now or timezone.now()
    prepared = _prepare_all(actor, items, lookups, now, dict(found or {}))
    earlier = _earlier_by_token(actor, prepared)
    with transaction.atomic():
        jobs, new = [], []
        for queue, share, unit, fields, fingerprint in prepared:
            token = fields["client_token"]
            key = (queue.pk, token)
            if token is not None and key in earlier:
                if earlier[key].request_fingerprint != fingerprint:
                    raise Conflict(f"client_token {token} was already used for a different request")
                jobs.append(earlier[key])
                continue
            job = _new_job(actor, queue, share, unit, fields, fingerprint, now)
            if token is not None:
                earlier[key] = job
            jobs.append(job)
            new.append(job)
        try:
            with transaction.atomic():
                insert_new(new)
        except IntegrityError:
            raise Conflict(
                "another request used one of these client_tokens meanwhile; send the batch again"
            ) from None
        insert_events([_submitted_event(actor, job, now) for job in new])
        for queue_id in {job.job_queue_id for job in new}:
            jobs_submitted(queue_id)
    return jobs


def _prepare_all(actor, items: list[dict | None], cache: dict, now, errors: dict) -> list:
    """Every item checked (_prepare), or InvalidInput naming each fault as jobs[i].field
    beside the `errors` the caller found."""
    prepared = []
    for index, item in enumerate(items):
        if item is None:
            continue
        try:
            prepared.append(_prepare(actor, item, cache, now))
        except ServiceError as err:
            errors.update({f"jobs[{index}].{field}": text for field, text in err.errors.items()})
    if errors:
        raise InvalidInput(errors)
    return prepared


def _prepare(actor, item: dict, cache: dict, now):
    """Check one submission (as submit_job takes it, the queue as an object or a name): the
    queue, share, unit, normalized fields and fingerprint, or InvalidInput."""
    options = {k: v for k, v in item.items() if k in JOB_OPTIONS}
    if unknown := sorted(set(item) - set(JOB_OPTIONS) - {*REQUIRED_FIELDS}):
        raise InvalidInput(dict.fromkeys(unknown, "unknown field"))
    queue = queue_named(cache, item["job_queue"])
    fields = {
        "job_queue": queue.name,
        **{key: item.get(key) for key in REQUIRED_FIELDS if key != "job_queue"},
        **JOB_OPTIONS,
        **options,
    }
    fields["evaluate_on_exit"] = fields["evaluate_on_exit"] or []
    fields["tags"] = fields["tags"] or {}
    fields["depends_on"] = fields["depends_on"] or []
    if errors := field_errors(fields):
        raise InvalidInput(errors)
    share, unit = target(actor, queue, fields, now, cache)
    fields["depends_on"] = dependencies_of(actor, fields["depends_on"])
    return queue, share, unit, fields, _fingerprint(fields)


REQUIRED_FIELDS = ("job_queue", "quota_share", "capacity_unit", "name")


def _earlier_by_token(actor, prepared) -> dict:
    tokens = {(queue.pk, fields["client_token"]) for queue, _, _, fields, _ in prepared}
    tokens = {pair for pair in tokens if pair[1] is not None}
    if not tokens:
        return {}
    found = Job.objects.filter(
        submitted_by=actor,
        job_queue_id__in={queue_id for queue_id, _ in tokens},
        client_token__in={token for _, token in tokens},
    )
    return {(job.job_queue_id, job.client_token): job for job in found}


def _new_job(actor, queue, share, unit, fields: dict, fingerprint: str, now, **extra) -> Job:
    """A job to insert; PENDING while it has dependencies (released by a tick)."""
    waits = bool(fields["depends_on"])
    return Job(
        job_queue=queue,
        quota_share=share,
        share_name=share.name,
        submitted_by=actor,
        capacity_unit=unit,
        name=fields["name"],
        request_fingerprint=fingerprint,
        status=JobStatus.PENDING if waits else JobStatus.RUNNABLE,
        status_reason=WAITS_FOR_DEPENDENCIES if waits else "",
        created_at=now,
        **{key: fields[key] for key in JOB_OPTIONS},
        **extra,
    )


WAITS_FOR_DEPENDENCIES = "Waits for its dependencies"


def _submitted_event(actor, job: Job, now) -> Event:
    return Event(
        time=now,
        actor=actor,
        actor_name=actor_name(actor),
        kind=EventKind.SUBMITTED,
        job=job,
        share=job.quota_share,
        job_queue_id=job.job_queue_id,
        detail={
            "quantity": job.quantity,
            "capacity_unit": job.capacity_unit.name,
            "scheduling_priority": job.scheduling_priority,
            **({"status": JobStatus.PENDING.value} if job.status == JobStatus.PENDING else {}),
            **({"depends_on": job.depends_on} if job.depends_on else {}),
        },
    )


def _same_request(actor, job_queue: JobQueue, client_token: str, fingerprint: str) -> Job | None:
    """The job this submitter made earlier with the same client_token (tokens are per user)."""
    existing = Job.objects.filter(
        job_queue=job_queue, client_token=client_token, submitted_by=actor
    ).first()
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
        changed = Job.objects.filter(pk=job.pk, status__in=(JobStatus.PENDING, *ACTIVE)).update(
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
    agents_must_hear(job.job_queue_id)  # its agents must stop it now
    return job
