"""Scheduling policies and job queues: creating, changing and deleting a queue, with its
time limits checked as AWS Batch checks them."""

from __future__ import annotations

from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    TIME_LIMIT_REASONS,
    EventKind,
    JobQueue,
    Ordering,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
)
from quotaportal.quotas.names import aws_name_error
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.resources import checked_tags, create_audited, delete_resource
from quotaportal.tick.changes import queue_changed


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


def create_scheduling_policy(actor, *, name: str, tags: dict | None = None) -> SchedulingPolicy:
    require_admin(actor, "create scheduling policies")
    if error := aws_name_error(name):
        raise InvalidInput({"name": error})
    tags = checked_tags(tags)
    return create_audited(actor, SchedulingPolicy, "scheduling policy", name=name, tags=tags)


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
    return create_audited(
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
