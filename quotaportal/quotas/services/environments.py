"""Service environments: creating and changing one (its backend, capacity and connection),
checked as AWS Batch checks a compute environment."""

from __future__ import annotations

import re

from django.db import transaction

from quotaportal.quotas.audit import record
from quotaportal.quotas.config_cache import config_changed
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    EnvironmentCapacity,
    EventKind,
    ServiceEnvironment,
    State,
)
from quotaportal.quotas.names import aws_name_error
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.resources import checked_tags, create_audited
from quotaportal.tick.changes import queue_changed
from scheduler.validation import instance_count_error


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
    env = create_audited(
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
