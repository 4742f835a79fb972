"""Admin-only resources: teams and members, capacity units, users, and deleting any
resource nothing depends on (a job queue without racing its environment's ticks). Service
environments and job queues have modules of their own (environments, queues)."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from quotaportal.infra.locks import lock_environment
from quotaportal.jobs.fields import tags_error
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    CapacityUnit,
    Event,
    EventKind,
    Job,
    JobQueue,
    Membership,
    Team,
)
from quotaportal.quotas.names import unit_name_error
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services import tokens


def create_audited(actor, model, kind_name: str, **fields):
    try:
        with transaction.atomic():
            obj = model.objects.create(**fields)
    except IntegrityError:
        raise InvalidInput(
            {"name": f"a {kind_name} named {fields.get('name')} already exists"}
        ) from None
    record(actor, EventKind.RESOURCE_CHANGED, action="created", resource=kind_name, name=str(obj))
    return obj


def checked_tags(tags) -> dict:
    """Tags given at creation, by AWS's rules (None means none)."""
    tags = tags or {}
    if error := tags_error(tags):
        raise InvalidInput({"tags": error})
    return tags


TEAM_NAME = re.compile(r"[-a-zA-Z0-9_]{1,64}")  # a slug, as the REST API takes it


def team_name_error(name) -> str | None:
    if not isinstance(name, str) or not TEAM_NAME.fullmatch(name):
        return "use 1 to 64 letters, digits, - or _ (no spaces)"
    return None


def create_team(actor, *, name: str) -> Team:
    require_admin(actor, "create teams")
    if error := team_name_error(name):
        raise InvalidInput({"name": error})
    return create_audited(actor, Team, "team", name=name)


def add_member(actor, team: Team, user, *, is_admin: bool = False) -> Membership:
    require_admin(actor, "change team membership")
    membership, _ = Membership.objects.update_or_create(
        team=team, user=user, defaults={"is_admin": is_admin}
    )
    return membership


def create_capacity_unit(
    actor, *, name: str, gpus_per_unit: int = 1, description: str = ""
) -> CapacityUnit:
    require_admin(actor, "create capacity units")
    if error := unit_name_error(name):
        raise InvalidInput({"name": error})
    _check_unit_fields(gpus_per_unit, description)
    return create_audited(
        actor,
        CapacityUnit,
        "capacity unit",
        name=name,
        gpus_per_unit=gpus_per_unit,
        description=description,
    )


MAX_GPUS_PER_UNIT = 64  # the largest machines have 16; the column is a small integer


def _check_unit_fields(gpus_per_unit, description) -> None:
    if (
        isinstance(gpus_per_unit, bool)
        or not isinstance(gpus_per_unit, int)
        or not 1 <= gpus_per_unit <= MAX_GPUS_PER_UNIT
    ):
        raise InvalidInput(
            {"gpus_per_unit": f"gpus_per_unit must be a whole number from 1 to {MAX_GPUS_PER_UNIT}"}
        )
    if not isinstance(description, str) or len(description) > 200:
        raise InvalidInput({"description": "description must be at most 200 characters"})


@transaction.atomic
def update_capacity_unit(
    actor, unit: CapacityUnit, *, gpus_per_unit: int, description: str = ""
) -> CapacityUnit:
    require_admin(actor, "change capacity units")
    _check_unit_fields(gpus_per_unit, description)
    unit.gpus_per_unit, unit.description = gpus_per_unit, description
    unit.save(update_fields=["gpus_per_unit", "description"])
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action="updated",
        resource="capacity unit",
        name=unit.name,
        gpus_per_unit=gpus_per_unit,
    )
    return unit


def _delete_queue(actor, queue: JobQueue) -> None:
    """Delete a queue without racing its environment's ticks: 409 when one holds on."""
    busy = Conflict(f"job queue {queue.name} is being scheduled right now; try again")
    # ProtectedError is an IntegrityError too: a queue holding jobs is no race to retry.
    try:
        with transaction.atomic():
            # No tick of its environment writes a record of the queue meanwhile, and one that
            # found the lock taken cannot record its skip until this is over (its foreign
            # key check waits for the queue's row), when the queue is gone.
            if not lock_environment(queue.service_environment_id):
                raise busy
            JobQueue.objects.select_for_update().filter(pk=queue.pk).first()
            _keep_events_of(queue)
            queue.delete()
    except ProtectedError:
        held = Job.objects.filter(job_queue=queue).count()
        if not held:
            raise Conflict(
                f"job queue {queue.name} is still in use and cannot be deleted"
            ) from None
        raise Conflict(
            f"job queue {queue.name} holds {held} job(s), whose history the portal keeps: a "
            "queue with jobs cannot be deleted (disable it instead)"
        ) from None
    except IntegrityError:
        raise busy from None


def _keep_events_of(queue: JobQueue) -> None:
    """The queue's audit events outlive it, naming it (their link to it is cleared)."""
    events = list(Event.objects.filter(job_queue=queue))
    for event in events:
        event.detail = {**event.detail, "job_queue": queue.name}
    Event.objects.bulk_update(events, ["detail"])


def delete_resource(actor, obj, kind_name: str) -> None:
    """Delete a team, unit, environment, policy or queue that nothing depends on any more."""
    require_admin(actor, f"delete {kind_name}s")
    try:
        if isinstance(obj, JobQueue):
            _delete_queue(actor, obj)
        else:
            with transaction.atomic():
                obj.delete()
    except ProtectedError:
        raise Conflict(f"{kind_name} {obj} is still in use and cannot be deleted") from None
    record(actor, EventKind.RESOURCE_CHANGED, action="deleted", resource=kind_name, name=str(obj))


@transaction.atomic
def create_user(
    username: str, *, teams: list[str] = (), admin: bool = False, password: str | None = None
) -> tuple[object, str]:
    """A user (optionally admin, in teams) and their API token; teams are created as needed."""
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=username)
    user.is_staff = user.is_superuser = admin
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.save()
    for team_name in teams:
        team, _ = Team.objects.get_or_create(name=team_name)
        Membership.objects.get_or_create(team=team, user=user)
    _, key = tokens.create_token(None, user, name="made by create_user")
    return user, key
