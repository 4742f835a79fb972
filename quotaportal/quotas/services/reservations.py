"""Reserved capacity with time windows (training plans): admins add and cancel them.

A reservation adds instances of a unit to an environment between its start and its end. The
tick sees the change at those instants: each change asks for ticks at both ends of the window
(Celery runs them at that time; the embedded loop wakes for them), and the beat is a fallback.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from quotaportal.quotas.audit import record
from quotaportal.quotas.backends import backend_for
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import CapacityUnit, EventKind, Reservation, ServiceEnvironment
from quotaportal.quotas.permissions import require_admin
from quotaportal.tick.changes import queue_changed
from quotaportal.tick.requests import send_tick_at
from scheduler.validation import MAX_INSTANCES

NAME_MAX = 128


def _errors(name, unit, instances, starts_at, ends_at, now) -> dict[str, str]:
    errors = {}
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX or "\x00" in name:
        errors["name"] = f"give a name of 1 to {NAME_MAX} characters"
    if unit is None:
        errors["capacity_unit"] = "choose a capacity unit"
    if (
        isinstance(instances, bool)
        or not isinstance(instances, int)
        or not 1 <= instances <= MAX_INSTANCES
    ):
        errors["instances"] = f"instances must be a whole number from 1 to {MAX_INSTANCES:,}"
    if not isinstance(starts_at, datetime) or timezone.is_naive(starts_at):
        errors["starts_at"] = "give the start as a date and time with a time zone"
    if not isinstance(ends_at, datetime) or timezone.is_naive(ends_at):
        errors["ends_at"] = "give the end as a date and time with a time zone"
    elif "starts_at" not in errors and ends_at <= starts_at:
        errors["ends_at"] = "the end must come after the start"
    elif ends_at <= now:
        errors["ends_at"] = "this window is already over; give an end in the future"
    return errors


@transaction.atomic
def create_reservation(
    actor,
    env: ServiceEnvironment,
    *,
    name: str,
    capacity_unit: str | CapacityUnit,
    instances: int,
    starts_at: datetime,
    ends_at: datetime,
    now: datetime | None = None,
) -> Reservation:
    require_admin(actor, "reserve capacity")
    if backend_for(env).schedules_itself:  # AWS Batch: its capacity is not the portal's
        raise Conflict(
            f"{env.name} is an {env.backend} environment: its reserved capacity (training "
            "plans) is AWS's to manage"
        )
    now = now or timezone.now()
    unit = capacity_unit
    if isinstance(capacity_unit, str):
        unit = CapacityUnit.objects.filter(name=capacity_unit).first()
    if errors := _errors(name, unit, instances, starts_at, ends_at, now):
        raise InvalidInput(errors)
    try:
        with transaction.atomic():
            reservation = Reservation.objects.create(
                environment=env,
                name=name.strip(),
                capacity_unit=unit,
                instances=instances,
                starts_at=starts_at,
                ends_at=ends_at,
            )
    except IntegrityError:
        raise InvalidInput(
            {"name": f"environment {env.name} already has a reservation named {name}"}
        ) from None
    _audit(actor, "created", reservation, now)
    _capacity_will_change(env, [starts_at, ends_at], now)
    return reservation


@transaction.atomic
def cancel_reservation(actor, reservation: Reservation, now: datetime | None = None) -> str:
    """Cancel a reservation: one not started yet goes; an active one ends now (so the next
    tick fits what runs to the capacity left); one already over stays as history."""
    require_admin(actor, "cancel reservations")
    now = now or timezone.now()
    env = reservation.environment
    if reservation.starts_at > now:
        reservation.delete()
        outcome = "deleted"
    elif reservation.ends_at > now:
        reservation.ends_at = now
        reservation.save(update_fields=["ends_at"])
        outcome = "ended early"
    else:
        raise InvalidInput({"reservation": "this reservation is already over"})
    _audit(actor, outcome, reservation, now)
    _capacity_will_change(env, [now], now)
    return outcome


def _audit(actor, action: str, reservation: Reservation, now) -> None:
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        when=now,
        action=action,
        resource="reservation",
        name=f"{reservation.environment.name}/{reservation.name}",
        capacity_unit=reservation.capacity_unit.name,
        instances=reservation.instances,
        starts_at=reservation.starts_at.isoformat(),
        ends_at=reservation.ends_at.isoformat(),
    )


def _capacity_will_change(env: ServiceEnvironment, instants: list[datetime], now) -> None:
    queue_ids = list(env.job_queues.values_list("id", flat=True))
    for queue_id in queue_ids:
        queue_changed(queue_id)
    if queue_ids and not settings.CELERY_TASK_ALWAYS_EAGER:
        later = [t for t in instants if t > now]
        transaction.on_commit(partial(_tick_at, queue_ids[0], later))


def _tick_at(queue_id: int, instants: list[datetime]) -> None:
    """Ticks of the environment at the instants its capacity changes (one queue's tick covers
    every queue of its environment)."""
    for when in instants:
        send_tick_at(queue_id, when)


def next_capacity_change(now: datetime | None = None) -> datetime | None:
    """The next start or end of any reservation: the embedded loop wakes for it."""
    now = now or timezone.now()
    starts = Reservation.objects.filter(starts_at__gt=now).order_by("starts_at")
    ends = Reservation.objects.filter(ends_at__gt=now).order_by("ends_at")
    times = [
        t
        for t in (
            starts.values_list("starts_at", flat=True).first(),
            ends.values_list("ends_at", flat=True).first(),
        )
        if t is not None
    ]
    return min(times, default=None)
