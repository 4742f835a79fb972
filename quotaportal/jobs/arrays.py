"""Job arrays (one submit, many alike jobs) and the release of PENDING jobs.

An array's children are ordinary jobs named `name[i]`; a child beyond the array's
`max_running` waits PENDING until a place frees. A job with dependencies waits PENDING too.
Each tick of a queue first releases (release_pending) the pending jobs whose turn has come,
as scheduler.dependencies decides: RUNNABLE from then on, planned like any other; a job whose
dependencies can no longer be met fails, saying which.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import Count, Exists, OuterRef
from django.db.models.base import ModelState
from django.utils import timezone

from quotaportal.infra.bulk import insert_new
from quotaportal.jobs.user_actions import _new_job, _prepare, _submitted_event
from quotaportal.quotas.audit import event_row, insert_events
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    ACTIVE,
    FINAL,
    EventKind,
    Job,
    JobArray,
    JobAttempt,
    JobStatus,
)
from quotaportal.quotas.permissions import actor_name, require_job_access
from quotaportal.tick.changes import (
    agents_must_hear,
    events_written,
    jobs_submitted,
    queue_changed,
)
from scheduler.dependencies import ARRAY_FULL, After, Waiting, release
from scheduler.validation import priority_error

MAX_ARRAY = 10_000
INSERT_BATCH = 2_000


def array_errors(size, max_running) -> dict[str, str]:
    errors = {}
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_ARRAY:
        errors["array_size"] = f"array_size must be a whole number from 1 to {MAX_ARRAY:,}"
    if max_running is not None and (
        isinstance(max_running, bool) or not isinstance(max_running, int) or max_running < 1
    ):
        errors["array_max_running"] = "array_max_running must be a whole number of at least 1"
    return errors


def submit_array(
    actor, *, size: int, max_running: int | None = None, now=None, **submission
) -> JobArray:
    """`size` children of one submission (what submit_job takes), named `name[0]` …; at most
    `max_running` of them RUNNABLE or running at once. Checked whole first: nothing is
    created when anything is wrong."""
    if errors := array_errors(size, max_running):
        raise InvalidInput(errors)
    if submission.get("client_token") is not None:
        raise InvalidInput({"client_token": "an array takes no client_token"})
    now = now or timezone.now()
    queue, share, unit, fields, fingerprint = _prepare(actor, submission, {}, now)
    suffix = len(f"[{size - 1}]")
    if len(fields["name"]) + suffix > 128:
        raise InvalidInput({"name": f"an array of {size:,} needs a name of at most {128 - suffix}"})
    with transaction.atomic():
        array = JobArray.objects.create(
            name=fields["name"],
            job_queue=queue,
            share_name=share.name,
            submitted_by=actor,
            size=size,
            max_running=max_running,
            created_at=now,
        )
        children = _children(actor, queue, share, unit, fields, fingerprint, now, array)
        for start in range(0, size, INSERT_BATCH):
            insert_new(children[start : start + INSERT_BATCH])
        insert_events(_submitted_events(actor, children, now))
        jobs_submitted(queue.pk)
    return array


def _children(actor, queue, share, unit, fields, fingerprint, now, array) -> list[Job]:
    """The array's children: one job built as a submit builds it, copied for each index
    (building ten thousand models one by one cost more than storing them)."""
    template = _new_job(actor, queue, share, unit, fields, fingerprint, now, array=array)
    limit = array.max_running if array.max_running is not None else array.size
    waits = template.status == JobStatus.PENDING
    children = []
    for index in range(array.size):
        child = _copy(template, id=uuid.uuid4(), name=f"{fields['name']}[{index}]")
        child.array_index = index
        if index >= limit and not waits:
            child.status, child.status_reason = JobStatus.PENDING, ARRAY_FULL
        children.append(child)
    return children


def _submitted_events(actor, children: list[Job], now) -> list:
    """Each child's SUBMITTED event, copied from the first of its kind (waiting or not)."""
    templates, events = {}, []
    for child in children:
        if child.status not in templates:
            templates[child.status] = _submitted_event(actor, child, now)
        events.append(_copy(templates[child.status], job_id=child.id))
    return events


def _copy(model, **changes):
    """A new, unsaved copy of a model instance with `changes` (its own state, no caches)."""
    twin = model.__class__.__new__(model.__class__)
    twin.__dict__.update(model.__dict__)
    twin._state = ModelState()
    for name, value in changes.items():
        setattr(twin, name, value)
    return twin


def _open_children(array: JobArray):
    return Job.objects.filter(array=array).exclude(status__in=FINAL)


def set_array_priority(actor, array: JobArray, priority: int) -> int:
    """Every child not final takes the priority; how many."""
    _require_access(actor, array)
    if error := priority_error(priority):
        raise InvalidInput({"scheduling_priority": error})
    with transaction.atomic():
        rows = list(
            _open_children(array)
            .select_for_update()
            .values_list("id", "scheduling_priority", "quota_share_id")
        )
        if not rows:
            raise Conflict(f"every job of array {array.name} has ended")
        Job.objects.filter(pk__in=[r[0] for r in rows]).update(scheduling_priority=priority)
        insert_events(
            [
                event_row(
                    EventKind.PRIORITY_CHANGED,
                    job_id=pk,
                    queue_id=array.job_queue_id,
                    share_id=share_id,
                    by=actor_name(actor),
                    **{"from": before, "to": priority},
                )
                for pk, before, share_id in rows
            ]
        )
    queue_changed(array.job_queue_id)
    return len(rows)


def terminate_array(actor, array: JobArray, reason: str, now=None) -> int:
    """Every child not final ends FAILED with `reason` (running ones are stopped); how many."""
    _require_access(actor, array)
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput({"reason": "give a reason for terminating the jobs"})
    now = now or timezone.now()
    with transaction.atomic():
        rows = list(_open_children(array).select_for_update().values_list("id", "quota_share_id"))
        ids = [pk for pk, _ in rows]
        Job.objects.filter(pk__in=ids).update(
            status=JobStatus.FAILED,
            status_reason=reason,
            stopped_at=now,
            is_terminated=True,
            pending_reason="",
        )
        JobAttempt.objects.filter(job_id__in=ids, stopped_at__isnull=True).update(
            stopped_at=now, status_reason=reason
        )
        JobArray.objects.filter(pk=array.pk).update(all_released=True)
        insert_events(
            [
                event_row(
                    EventKind.TERMINATED,
                    job_id=pk,
                    queue_id=array.job_queue_id,
                    share_id=share_id,
                    by=actor_name(actor),
                    when=now,
                    reason=reason,
                )
                for pk, share_id in rows
            ]
        )
    queue_changed(array.job_queue_id)
    agents_must_hear(array.job_queue_id)  # their running ranks must stop
    return len(rows)


def _require_access(actor, array: JobArray) -> None:
    child = Job.objects.filter(array=array).select_related("quota_share").first()
    if child is not None:
        require_job_access(actor, child)


MAX_FAILURE_ROUNDS = 20  # a chain of dependants failing in one tick, link by link


def has_pending() -> Exists:
    """Whether a queue (the outer row) holds any PENDING job: read with the queue, so a tick
    of a queue with none (the usual case) spends no statement of its own on release_pending."""
    return Exists(Job.objects.filter(job_queue_id=OuterRef("pk"), status=JobStatus.PENDING))


def release_pending(queue_id: int, now, *, any_pending: bool) -> int:
    """Before a queue is planned: its PENDING jobs whose dependencies are met, and its array
    children for which a place has freed, become RUNNABLE; those whose dependencies can no
    longer be met fail, and then their own dependants. How many changed. `any_pending`:
    whether the queue holds PENDING jobs, as the caller read it with the queue (has_pending)."""
    pending = Job.objects.filter(job_queue_id=queue_id, status=JobStatus.PENDING)
    changed = 0
    for _ in range(MAX_FAILURE_ROUNDS):
        if not any_pending:
            break
        room = _room(queue_id)
        waiting = [*_single_jobs(pending), *_array_candidates(room)]
        statuses, names = _dependencies([w for w, _ in waiting])
        result = release([w for w, _ in waiting], statuses, names, room)
        changed += _apply_release(queue_id, result, dict(waiting), now)
        if not result.failed:
            break
        any_pending = pending.exists()  # the failures may have ended the last of them
    if changed:
        queue_changed(queue_id)
    return changed


def _as_waiting(pk, depends_on, array_id, index) -> Waiting:
    after = tuple((d["job_id"], After(d["type"])) for d in depends_on or [])
    return Waiting(str(pk), after, str(array_id) if array_id else None, index or 0)


def _single_jobs(pending) -> list[tuple[Waiting, str]]:
    rows = pending.filter(array__isnull=True).values_list(
        "id", "depends_on", "array_id", "array_index", "status_reason"
    )
    return [(_as_waiting(*row[:4]), row[4]) for row in rows]


def _array_candidates(room: dict[str, int]) -> list[tuple[Waiting, str]]:
    """Per array with places free, only its first pending children in index order, as many
    as there are places: a sweep of 10,000 is not read whole each tick. An array with none
    left to release is marked so, and not looked at again."""
    found, done = [], []
    for array_id, free in room.items():
        if free <= 0:
            continue
        rows = list(
            Job.objects.filter(array_id=array_id, status=JobStatus.PENDING)
            .order_by("array_index")
            .values_list("id", "depends_on", "array_id", "array_index", "status_reason")[:free]
        )
        if not rows:
            done.append(array_id)
        found += [(_as_waiting(*row[:4]), row[4]) for row in rows]
    if done:
        JobArray.objects.filter(pk__in=done).update(all_released=True)
    return found


def _room(queue_id: int) -> dict[str, int]:
    """Per array of the queue with children still to release, how many more of them may be
    RUNNABLE or running (an array without a limit: all of them)."""
    arrays = dict(
        JobArray.objects.filter(job_queue_id=queue_id, all_released=False).values_list(
            "id", "max_running"
        )
    )
    limited = [pk for pk, limit in arrays.items() if limit is not None]
    busy = dict(
        Job.objects.filter(array_id__in=limited, status__in=ACTIVE)
        .values("array_id")
        .annotate(n=Count("id"))
        .values_list("array_id", "n")
        .order_by()
    )
    return {
        str(pk): MAX_ARRAY if limit is None else max(0, limit - busy.get(pk, 0))
        for pk, limit in arrays.items()
    }


def _dependencies(waiting: list[Waiting]) -> tuple[dict[str, str], dict[str, str]]:
    ids = {job_id for w in waiting for job_id, _ in w.after}
    if not ids:
        return {}, {}
    rows = Job.objects.filter(pk__in=ids).values_list("id", "status", "name")
    return {str(pk): status for pk, status, _ in rows}, {str(pk): name for pk, _, name in rows}


def _apply_release(queue_id: int, result, reasons: dict, now) -> int:
    if result.released:
        Job.objects.filter(pk__in=result.released, status=JobStatus.PENDING).update(
            status=JobStatus.RUNNABLE, status_reason="", pending_reason=""
        )
    for job_id, why in result.failed.items():
        Job.objects.filter(pk=job_id, status=JobStatus.PENDING).update(
            status=JobStatus.FAILED, status_reason=why, stopped_at=now
        )
    for job_id, why in result.waiting.items():
        if reasons.get(job_id) != why:
            Job.objects.filter(pk=job_id, status=JobStatus.PENDING).update(status_reason=why)
    _release_events(queue_id, result, now)
    return len(result.released) + len(result.failed)


def _release_events(queue_id: int, result, now) -> None:
    changed = dict.fromkeys(result.released, EventKind.RELEASED)
    changed |= dict.fromkeys(result.failed, EventKind.FAILED)
    if not changed:
        return
    shares = dict(Job.objects.filter(pk__in=list(changed)).values_list("id", "quota_share_id"))
    insert_events(
        [
            event_row(
                kind,
                job_id=job_id,
                queue_id=queue_id,
                share_id=shares.get(job_id),
                when=now,
                **({"reason": result.failed[job_id]} if kind == EventKind.FAILED else {}),
            )
            for job_id, kind in changed.items()
        ]
    )
    events_written()
