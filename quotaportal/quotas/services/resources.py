"""Admin-only resources: teams, capacity units, environments, policies, job queues, users."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from rest_framework.authtoken.models import Token

from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    EnvironmentCapacity,
    EventKind,
    JobQueue,
    Membership,
    Ordering,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
    Team,
)
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.audit import record
from quotaportal.quotas.services.ticks import queue_changed


def _created(actor, model, kind_name: str, **fields):
    try:
        with transaction.atomic():
            obj = model.objects.create(**fields)
    except IntegrityError:
        raise InvalidInput(
            {"name": f"a {kind_name} named {fields.get('name')} already exists"}
        ) from None
    record(actor, EventKind.RESOURCE_CHANGED, action="created", resource=kind_name, name=str(obj))
    return obj


def create_team(actor, *, name: str) -> Team:
    require_admin(actor, "create teams")
    return _created(actor, Team, "team", name=name)


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
    if not isinstance(gpus_per_unit, int) or gpus_per_unit < 1:
        raise InvalidInput({"gpus_per_unit": "gpus_per_unit must be at least 1"})
    return _created(
        actor,
        CapacityUnit,
        "capacity unit",
        name=name,
        gpus_per_unit=gpus_per_unit,
        description=description,
    )


def _check_capacity(capacity_limits) -> dict[str, CapacityUnit]:
    if not isinstance(capacity_limits, dict) or not capacity_limits:
        raise InvalidInput(
            {"capacity_limits": "give at least one capacity unit with its max_capacity"}
        )
    if any(
        not isinstance(n, int) or isinstance(n, bool) or n < 0 for n in capacity_limits.values()
    ):
        raise InvalidInput({"capacity_limits": "max_capacity must be a whole number of at least 0"})
    units = {u.name: u for u in CapacityUnit.objects.filter(name__in=list(capacity_limits))}
    unknown = sorted(set(capacity_limits) - set(units))
    if unknown:
        raise InvalidInput({"capacity_limits": f"unknown capacity unit(s): {', '.join(unknown)}"})
    return units


@transaction.atomic
def create_service_environment(
    actor,
    *,
    name: str,
    capacity_limits: dict[str, int],
    backend: str = Backend.SIMULATED,
    state: str = State.ENABLED,
    region: str = "",
) -> ServiceEnvironment:
    require_admin(actor, "create service environments")
    if backend not in Backend.values:
        raise InvalidInput({"backend": f"backend must be one of {', '.join(Backend.values)}"})
    if state not in State.values:
        raise InvalidInput({"state": "state must be ENABLED or DISABLED"})
    units = _check_capacity(capacity_limits)
    env = _created(
        actor,
        ServiceEnvironment,
        "service environment",
        name=name,
        backend=backend,
        state=state,
        region=region,
    )
    EnvironmentCapacity.objects.bulk_create(
        EnvironmentCapacity(environment=env, capacity_unit=units[u], max_capacity=n)
        for u, n in capacity_limits.items()
    )
    return env


@transaction.atomic
def update_service_environment(
    actor, env: ServiceEnvironment, *, capacity_limits=None, state: str | None = None
) -> ServiceEnvironment:
    require_admin(actor, "change service environments")
    if state is not None:
        if state not in State.values:
            raise InvalidInput({"state": "state must be ENABLED or DISABLED"})
        env.state = state
        env.save(update_fields=["state"])
    if capacity_limits is not None:
        units = _check_capacity(capacity_limits)
        for name, count in capacity_limits.items():
            EnvironmentCapacity.objects.update_or_create(
                environment=env, capacity_unit=units[name], defaults={"max_capacity": count}
            )
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action="updated",
        resource="service environment",
        name=env.name,
        capacity_limits=capacity_limits,
        state=state,
    )
    for queue_id in env.job_queues.values_list("id", flat=True):
        queue_changed(queue_id)
    return env


def create_scheduling_policy(actor, *, name: str) -> SchedulingPolicy:
    require_admin(actor, "create scheduling policies")
    return _created(actor, SchedulingPolicy, "scheduling policy", name=name)


def create_job_queue(
    actor,
    *,
    name: str,
    scheduling_policy: SchedulingPolicy,
    service_environment: ServiceEnvironment,
    priority: int = 1,
    ordering: str = Ordering.STRICT,
    state: str = State.ENABLED,
    preemption_grace_seconds: int = 30,
) -> JobQueue:
    require_admin(actor, "create job queues")
    errors = {}
    if not isinstance(priority, int) or not 0 <= priority <= 1000:
        errors["priority"] = "priority must be between 0 and 1000"
    if ordering not in Ordering.values:
        errors["ordering"] = "ordering must be STRICT or BEST_EFFORT"
    if state not in State.values:
        errors["state"] = "state must be ENABLED or DISABLED"
    if errors:
        raise InvalidInput(errors)
    return _created(
        actor,
        JobQueue,
        "job queue",
        name=name,
        scheduling_policy=scheduling_policy,
        service_environment=service_environment,
        priority=priority,
        ordering=ordering,
        state=state,
        preemption_grace_seconds=preemption_grace_seconds,
    )


def update_job_queue(actor, queue: JobQueue, **changes) -> JobQueue:
    require_admin(actor, "change job queues")
    allowed = {"priority", "ordering", "state", "preemption_grace_seconds", "scheduling_policy"}
    if unknown := sorted(set(changes) - allowed):
        raise InvalidInput(dict.fromkeys(unknown, "this field cannot be changed"))
    if "ordering" in changes and changes["ordering"] not in Ordering.values:
        raise InvalidInput({"ordering": "ordering must be STRICT or BEST_EFFORT"})
    if "state" in changes and changes["state"] not in State.values:
        raise InvalidInput({"state": "state must be ENABLED or DISABLED"})
    if "priority" in changes and not 0 <= changes["priority"] <= 1000:
        raise InvalidInput({"priority": "priority must be between 0 and 1000"})
    for field, value in changes.items():
        setattr(queue, field, value)
    queue.save()
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action="updated",
        resource="job queue",
        name=queue.name,
        changes={k: str(v) for k, v in changes.items()},
    )
    queue_changed(queue.pk)
    return queue


def delete_resource(actor, obj, kind_name: str) -> None:
    """Delete a team, unit, environment, policy or queue that nothing depends on any more."""
    require_admin(actor, f"delete {kind_name}s")
    from django.db.models import ProtectedError

    try:
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
    token, _ = Token.objects.get_or_create(user=user)
    return user, token.key
