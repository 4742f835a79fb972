"""Admin-only resources: teams, capacity units, environments, policies, job queues, users."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from quotaportal.infra.locks import lock_environment
from quotaportal.quotas.audit import record
from quotaportal.quotas.config_cache import config_changed
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    TIME_LIMIT_REASONS,
    Backend,
    CapacityUnit,
    EnvironmentCapacity,
    Event,
    EventKind,
    Job,
    JobQueue,
    Membership,
    Ordering,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
    Team,
)
from quotaportal.quotas.names import aws_name_error, unit_name_error
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services import tokens
from quotaportal.quotas.services.job_fields import tags_error
from quotaportal.quotas.ticking.changes import queue_changed
from scheduler.validation import instance_count_error


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
    if error := unit_name_error(name):
        raise InvalidInput({"name": error})
    _check_unit_fields(gpus_per_unit, description)
    return _created(
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


def delete_job_queue(actor, queue: JobQueue) -> None:
    """Refused while the queue has quota shares: deleting those terminates their jobs, which
    an admin does share by share (a share is disabled before it is deleted: docs/guides/web.md)."""
    require_admin(actor, "delete job queues")
    shares = list(queue.quota_shares.order_by("name").values_list("name", flat=True))
    if shares:
        raise Conflict(
            f"job queue {queue.name} still has quota shares ({', '.join(shares[:5])}); "
            "disable and delete them first"
        )
    if jobs := queue.jobs.count():
        raise Conflict(
            f"job queue {queue.name} holds {jobs} job(s) and their history; "
            "disable the queue instead"
        )
    delete_resource(actor, queue, "job queue")


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


def _check_capacity(capacity_limits) -> dict[str, CapacityUnit]:
    if not isinstance(capacity_limits, dict) or not capacity_limits:
        raise InvalidInput(
            {"capacity_limits": "give at least one capacity unit with its max_capacity"}
        )
    if any(instance_count_error(n, 0) for n in capacity_limits.values()):
        raise InvalidInput({"capacity_limits": instance_count_error(None, 0)})
    units = {u.name: u for u in CapacityUnit.objects.filter(name__in=list(capacity_limits))}
    unknown = sorted(set(capacity_limits) - set(units))
    if unknown:
        raise InvalidInput({"capacity_limits": f"unknown capacity unit(s): {', '.join(unknown)}"})
    return units


AWS_CONNECTION_FIELDS = ("region", "endpoint_url", "aws_profile")
AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
AWS_PROFILE = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
ENDPOINT_URL = re.compile(r"https?://[^\s/?#]+(/[^\s?#]*)?")


def aws_connection_errors(backend: str, region, endpoint_url, aws_profile) -> dict[str, str]:
    """Where an AWS_BATCH environment sends its calls. Credentials are never given here: boto3
    finds them in its standard chain (environment, the named profile, an instance role)."""
    if backend != Backend.AWS_BATCH:
        given = {"endpoint_url": endpoint_url, "aws_profile": aws_profile}
        return {
            key: "only AWS_BATCH environments call AWS; leave this empty"
            for key, value in given.items()
            if value
        }
    errors = {}
    if not isinstance(region, str) or not AWS_REGION.fullmatch(region):
        errors["region"] = "an AWS_BATCH environment needs its AWS region, e.g. us-west-2"
    if endpoint_url and (
        not isinstance(endpoint_url, str)
        or len(endpoint_url) > 256
        or not ENDPOINT_URL.fullmatch(endpoint_url)
    ):
        errors["endpoint_url"] = (
            "give an http:// or https:// URL of at most 256 characters, or leave it empty "
            "for AWS's own endpoint"
        )
    if aws_profile and (not isinstance(aws_profile, str) or not AWS_PROFILE.fullmatch(aws_profile)):
        errors["aws_profile"] = (
            "a profile name of the AWS config files: 1 to 64 letters, digits, or _ . @ + -"
        )
    return errors


@transaction.atomic
def create_service_environment(
    actor,
    *,
    name: str,
    capacity_limits: dict[str, int],
    backend: str = Backend.SIMULATED,
    state: str = State.ENABLED,
    region: str = "",
    endpoint_url: str = "",
    aws_profile: str = "",
    tags: dict | None = None,
) -> ServiceEnvironment:
    require_admin(actor, "create service environments")
    if error := aws_name_error(name):
        raise InvalidInput({"name": error})
    tags = checked_tags(tags)
    if backend not in Backend.values:
        raise InvalidInput({"backend": f"backend must be one of {', '.join(Backend.values)}"})
    if state not in State.values:
        raise InvalidInput({"state": "state must be ENABLED or DISABLED"})
    region, endpoint_url, aws_profile = region or "", endpoint_url or "", aws_profile or ""
    if errors := aws_connection_errors(backend, region, endpoint_url, aws_profile):
        raise InvalidInput(errors)
    units = _check_capacity(capacity_limits)
    env = _created(
        actor,
        ServiceEnvironment,
        "service environment",
        name=name,
        backend=backend,
        state=state,
        region=region,
        endpoint_url=endpoint_url,
        aws_profile=aws_profile,
        tags=tags,
    )
    EnvironmentCapacity.objects.bulk_create(
        EnvironmentCapacity(environment=env, capacity_unit=units[u], max_capacity=n)
        for u, n in capacity_limits.items()
    )
    config_changed()  # bulk_create sends no signal
    return env


@transaction.atomic
def update_service_environment(
    actor,
    env: ServiceEnvironment,
    *,
    capacity_limits=None,
    state: str | None = None,
    **connection,
) -> ServiceEnvironment:
    """Change capacity, state, and (AWS_BATCH) region, endpoint_url or aws_profile."""
    require_admin(actor, "change service environments")
    if unknown := sorted(set(connection) - set(AWS_CONNECTION_FIELDS)):
        raise InvalidInput(dict.fromkeys(unknown, "this field cannot be changed"))
    if connection:
        merged = {
            key: connection.get(key, getattr(env, key)) or "" for key in AWS_CONNECTION_FIELDS
        }
        if errors := aws_connection_errors(env.backend, **merged):
            raise InvalidInput(errors)
        for key, value in merged.items():
            setattr(env, key, value)
        env.save(update_fields=list(merged))
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
        **connection,
    )
    for queue_id in env.job_queues.values_list("id", flat=True):
        queue_changed(queue_id)
    return env


def create_scheduling_policy(actor, *, name: str, tags: dict | None = None) -> SchedulingPolicy:
    require_admin(actor, "create scheduling policies")
    if error := aws_name_error(name):
        raise InvalidInput({"name": error})
    tags = checked_tags(tags)
    return _created(actor, SchedulingPolicy, "scheduling policy", name=name, tags=tags)


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
    job_state_time_limit_actions: list | None = None,
    tags: dict | None = None,
) -> JobQueue:
    require_admin(actor, "create job queues")
    if error := aws_name_error(name):
        raise InvalidInput({"name": error})
    tags = checked_tags(tags)
    errors = {}
    actions = job_state_time_limit_actions or []
    if error := time_limit_actions_error(actions):
        errors["job_state_time_limit_actions"] = error
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
        job_state_time_limit_actions=actions,
        tags=tags,
    )


TIME_LIMIT_RANGE = (600, 86_400)  # AWS's bounds on maxTimeSeconds


def time_limit_actions_error(actions) -> str | None:
    """AWS's rules for jobStateTimeLimitActions: state RUNNABLE, action TERMINATE (the only one
    for SageMaker training), max_time_seconds 600 to 86400, one of AWS's three reasons, at
    most 5 actions."""
    if not isinstance(actions, list) or len(actions) > 5:
        return "give a list of at most 5 actions"
    low, high = TIME_LIMIT_RANGE
    for action in actions:
        if not isinstance(action, dict) or set(action) - {
            "reason",
            "state",
            "max_time_seconds",
            "action",
        }:
            return "each action has reason, state, max_time_seconds and action"
        seconds = action.get("max_time_seconds")
        if not isinstance(seconds, int) or isinstance(seconds, bool) or not low <= seconds <= high:
            return f"max_time_seconds must be a whole number from {low} to {high}"
        if action.get("state", "RUNNABLE") != "RUNNABLE":
            return "state must be RUNNABLE"
        if action.get("action", "TERMINATE") != "TERMINATE":
            return "action must be TERMINATE"
        if action.get("reason") not in TIME_LIMIT_REASONS:
            return f"reason must be one of AWS's: {', '.join(TIME_LIMIT_REASONS)}"
    return None


def update_job_queue(actor, queue: JobQueue, **changes) -> JobQueue:
    require_admin(actor, "change job queues")
    allowed = {
        "priority",
        "ordering",
        "state",
        "preemption_grace_seconds",
        "scheduling_policy",
        "job_state_time_limit_actions",
    }
    if unknown := sorted(set(changes) - allowed):
        raise InvalidInput(dict.fromkeys(unknown, "this field cannot be changed"))
    if "ordering" in changes and changes["ordering"] not in Ordering.values:
        raise InvalidInput({"ordering": "ordering must be STRICT or BEST_EFFORT"})
    if "state" in changes and changes["state"] not in State.values:
        raise InvalidInput({"state": "state must be ENABLED or DISABLED"})
    if "priority" in changes and not 0 <= changes["priority"] <= 1000:
        raise InvalidInput({"priority": "priority must be between 0 and 1000"})
    if "job_state_time_limit_actions" in changes and (
        error := time_limit_actions_error(changes["job_state_time_limit_actions"])
    ):
        raise InvalidInput({"job_state_time_limit_actions": error})
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
