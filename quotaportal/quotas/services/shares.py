"""Creating, changing and deleting quota shares, with AWS Batch's rules."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from quotaportal.jobs.user_actions import terminate_job
from quotaportal.quotas.audit import record
from quotaportal.quotas.config_cache import config_changed
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    CapacityUnit,
    EventKind,
    JobQueue,
    QuotaShare,
    ShareCapacityLimit,
    State,
    Strategy,
    Team,
)
from quotaportal.quotas.names import aws_name_error
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.resources import checked_tags
from quotaportal.tick.changes import queue_changed
from scheduler.validation import MAX_SHARES_PER_QUEUE, share_config_errors

EDITABLE = (
    "capacity_limits",
    "sharing_strategy",
    "borrow_limit",
    "in_share_preemption",
    "state",
    "team",
    "fair_share_weight",
)


def _check_name(name: str) -> None:
    if error := aws_name_error(name):
        raise InvalidInput({"name": error})


def _resolve_units(limits: dict[str, int]) -> dict[str, CapacityUnit]:
    units = {u.name: u for u in CapacityUnit.objects.filter(name__in=list(limits))}
    unknown = sorted(set(limits) - set(units))
    if unknown:
        raise InvalidInput({"capacity_limits": f"unknown capacity unit(s): {', '.join(unknown)}"})
    return units


def _validate(limits, strategy, borrow_limit, state) -> None:
    if not isinstance(limits, dict):
        raise InvalidInput({"capacity_limits": "give a mapping of capacity unit to max_capacity"})
    errors = share_config_errors(limits, strategy, borrow_limit)
    if state not in State.values:
        errors["state"] = "state must be ENABLED or DISABLED"
    if errors:
        raise InvalidInput(errors)


def _write_limits(share: QuotaShare, limits: dict[str, int], units=None) -> None:
    units = units or _resolve_units(limits)
    share.capacity_limits.all().delete()
    ShareCapacityLimit.objects.bulk_create(
        ShareCapacityLimit(share=share, capacity_unit=units[name], max_capacity=count)
        for name, count in sorted(limits.items())
    )
    config_changed()  # bulk_create sends no signal


def limits_of(share: QuotaShare) -> dict[str, int]:
    return {
        lim.capacity_unit.name: lim.max_capacity
        for lim in share.capacity_limits.select_related("capacity_unit")
    }


MAX_WEIGHT = 1_000_000


def weight_error(weight) -> str | None:
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not 0 < weight <= MAX_WEIGHT  # NaN fails this too
    ):
        return f"a weight is a number above 0 and at most {MAX_WEIGHT:,}"
    return None


def _check_weight(weight) -> None:
    if error := weight_error(weight):
        raise InvalidInput({"fair_share_weight": error})


@transaction.atomic
def create_share(
    actor,
    *,
    job_queue: JobQueue,
    name: str,
    team: Team,
    capacity_limits: dict[str, int],
    sharing_strategy: str,
    borrow_limit: int | None = None,
    in_share_preemption: bool = False,
    state: str = State.ENABLED,
    tags: dict | None = None,
    fair_share_weight: float = 1.0,
) -> QuotaShare:
    require_admin(actor, "create quota shares")
    _check_name(name)
    _check_weight(fair_share_weight)
    tags = checked_tags(tags)
    _validate(capacity_limits, sharing_strategy, borrow_limit, state)
    units = _resolve_units(capacity_limits)  # before anything is written
    _make_room(job_queue, name)
    share = _insert_share(
        job_queue,
        name=name,
        team=team,
        sharing_strategy=sharing_strategy,
        borrow_limit=-1 if borrow_limit is None else borrow_limit,
        in_share_preemption=in_share_preemption,
        state=state,
        tags=tags,
        fair_share_weight=fair_share_weight,
    )
    _write_limits(share, capacity_limits, units)
    record(
        actor,
        EventKind.SHARE_CREATED,
        share=share,
        queue=job_queue,
        name=name,
        capacity_limits=capacity_limits,
        sharing_strategy=sharing_strategy,
        borrow_limit=share.borrow_limit,
        in_share_preemption=in_share_preemption,
        state=state,
    )
    queue_changed(job_queue.pk)
    return share


def _make_room(job_queue: JobQueue, name: str) -> None:
    """Refuse a 21st share or a second of that name. The queue row is locked so two
    concurrent creates cannot both pass the count."""
    JobQueue.objects.select_for_update().get(pk=job_queue.pk)
    if job_queue.quota_shares.count() >= MAX_SHARES_PER_QUEUE:
        raise Conflict(
            f"job queue {job_queue.name} already has {MAX_SHARES_PER_QUEUE} quota shares,"
            " the most AWS allows"
        )
    if job_queue.quota_shares.filter(name=name).exists():
        raise _name_taken(job_queue, name)


def _insert_share(job_queue: JobQueue, **fields) -> QuotaShare:
    try:
        with transaction.atomic():
            return QuotaShare.objects.create(job_queue=job_queue, **fields)
    except IntegrityError:  # a create of the same name committed since the check
        raise _name_taken(job_queue, fields["name"]) from None


def _name_taken(job_queue: JobQueue, name: str) -> InvalidInput:
    return InvalidInput(
        {"name": f"a quota share named {name} already exists in job queue {job_queue.name}"}
    )


@transaction.atomic
def update_share(actor, share: QuotaShare, **changes) -> QuotaShare:
    """Apply an admin's edits. Lowering a limit never preempts by itself (docs/concepts.md,
    The scheduler)."""
    require_admin(actor, "change quota shares")
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise InvalidInput(dict.fromkeys(unknown, "this field cannot be changed"))
    share = QuotaShare.objects.select_for_update().get(pk=share.pk)
    before = {
        "capacity_limits": limits_of(share),
        "sharing_strategy": share.sharing_strategy,
        "borrow_limit": share.borrow_limit,
        "in_share_preemption": share.in_share_preemption,
        "state": share.state,
        "team": share.team.name,
        "fair_share_weight": share.fair_share_weight,
    }
    strategy = changes.get("sharing_strategy", share.sharing_strategy)
    borrow_limit = changes.get("borrow_limit")
    if borrow_limit is None:
        # Leaving LEND_AND_BORROW drops the borrow limit, which no other strategy may carry.
        borrow_limit = share.borrow_limit if strategy == Strategy.LEND_AND_BORROW else -1
    limits = changes.get("capacity_limits", before["capacity_limits"])
    state = changes.get("state", share.state)
    _validate(limits, strategy, borrow_limit, state)
    share.sharing_strategy, share.borrow_limit, share.state = strategy, borrow_limit, state
    share.in_share_preemption = bool(changes.get("in_share_preemption", share.in_share_preemption))
    share.team = changes.get("team", share.team)
    if "fair_share_weight" in changes:
        _check_weight(changes["fair_share_weight"])
        share.fair_share_weight = float(changes["fair_share_weight"])
    share.save()
    if "capacity_limits" in changes:
        _write_limits(share, limits)
    after = {
        **before,
        **{k: v for k, v in changes.items() if k != "team"},
        "borrow_limit": borrow_limit,
    }
    if "team" in changes:
        after["team"] = share.team.name
    diff = {k: [before[k], after[k]] for k in before if before[k] != after[k]}
    record(actor, EventKind.SHARE_CHANGED, share=share, queue=share.job_queue, changes=diff)
    queue_changed(share.job_queue_id)
    return share


@transaction.atomic
def delete_share(actor, share: QuotaShare, reason: str = "Quota share deleted") -> None:
    """Delete a DISABLED share; its unfinished jobs end FAILED with `reason` (AWS behaviour)."""

    require_admin(actor, "delete quota shares")
    share = QuotaShare.objects.select_for_update().get(pk=share.pk)
    if share.state != State.DISABLED:
        raise Conflict(f"quota share {share.name} must be DISABLED before it is deleted")
    for job in share.jobs.exclude(status__in=("SUCCEEDED", "FAILED")):
        terminate_job(actor, job, reason)
    record(actor, EventKind.SHARE_DELETED, queue=share.job_queue, name=share.name)
    queue_id = share.job_queue_id
    share.delete()
    queue_changed(queue_id)
