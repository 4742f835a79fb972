"""Scheduling policies, service environments and job queues (AWS Batch's shapes)."""

from __future__ import annotations

from quotaportal.awsbatch.conventions import BACKEND_TAG, SAGEMAKER_TRAINING, arn
from quotaportal.awsbatch.endpoint import lookups
from quotaportal.awsbatch.endpoint.operations.registry import operation
from quotaportal.awsbatch.endpoint.wire import (
    AwsError,
    aws_name,
    capacity_unit,
    one_of,
    paged,
    required,
    typed,
)
from quotaportal.quotas import services
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    JobQueue,
    SchedulingPolicy,
    ServiceEnvironment,
    State,
)
from quotaportal.quotas.permissions import require_admin

ENDPOINT_BACKENDS = (Backend.SIMULATED, Backend.LOCAL)
ALREADY_EXISTS = "Object already exists"  # AWS's own text for a duplicate name


def _created(create):
    """Run a create service; a duplicate name is answered with AWS's message."""
    try:
        return create()
    except InvalidInput as err:
        if any("already exists" in str(m) for m in err.errors.values()):
            raise AwsError(ALREADY_EXISTS) from None
        raise


# Scheduling policies


def _quota_share_policy(body: dict, required_now: bool) -> None:
    if body.get("fairsharePolicy") is not None:
        raise AwsError(
            "fairsharePolicy is not supported: quotaportal schedules by quota shares; "
            "give quotaSharePolicy"
        )
    policy = typed(body, "quotaSharePolicy", dict)
    if policy is None:
        if required_now:
            raise AwsError("quotaSharePolicy is required")
        return
    one_of(policy, "idleResourceAssignmentStrategy", ["FIFO"], "FIFO")


def policy_shape(policy: SchedulingPolicy, with_tags: bool = True) -> dict:
    shape = {
        "name": policy.name,
        "arn": arn("scheduling-policy", policy.name),
        "quotaSharePolicy": {
            "idleResourceAssignmentStrategy": policy.idle_resource_assignment_strategy
        },
    }
    if with_tags:
        shape["tags"] = policy.tags
    return shape


@operation("CreateSchedulingPolicy")
def create_scheduling_policy(actor, body):
    name = aws_name(body, "name")
    _quota_share_policy(body, required_now=True)
    policy = _created(
        lambda: services.create_scheduling_policy(actor, name=name, tags=typed(body, "tags", dict))
    )
    return {"name": policy.name, "arn": arn("scheduling-policy", policy.name)}


@operation("UpdateSchedulingPolicy")
def update_scheduling_policy(actor, body):
    lookups.scheduling_policy(required(body, "arn"))
    _quota_share_policy(body, required_now=False)
    require_admin(actor, "change scheduling policies")
    return {}  # FIFO is the only strategy, so there is nothing else to change


@operation("DescribeSchedulingPolicies")
def describe_scheduling_policies(actor, body):
    arns = required(body, "arns", list)
    names = [lookups.policy_name(value) for value in arns]
    found = SchedulingPolicy.objects.filter(name__in=names).order_by("name")
    return {"schedulingPolicies": [policy_shape(p) for p in found]}


@operation("ListSchedulingPolicies")
def list_scheduling_policies(actor, body):
    policies = SchedulingPolicy.objects.order_by("name")
    return paged(
        body,
        policies,
        "ListSchedulingPolicies",
        "schedulingPolicies",
        lambda p: {"arn": arn("scheduling-policy", p.name)},
    )


@operation("DeleteSchedulingPolicy")
def delete_scheduling_policy(actor, body):
    policy = lookups.scheduling_policy(required(body, "arn"))
    services.delete_resource(actor, policy, "scheduling policy")
    return {}


def _require_disabled_to_delete(actor, obj, kind: str) -> None:
    """AWS deletes only what was first DISABLED, so nothing is deleted by a slip."""
    require_admin(actor, f"delete {kind}s")
    if obj.state != State.DISABLED:
        raise AwsError(f"{kind.capitalize()} {obj.name} must be DISABLED before it is deleted")


# Service environments


def read_capacity_limits(body: dict, key: str = "capacityLimits") -> dict[str, int] | None:
    limits = typed(body, key, list)
    if limits is None:
        return None
    result = {}
    for limit in limits:
        if not isinstance(limit, dict):
            raise AwsError(f"each of {key} is an object {{capacityUnit, maxCapacity}}")
        unit = capacity_unit(limit)
        if unit in result:
            raise AwsError(f"{key} names {unit} twice")
        result[unit] = required(limit, "maxCapacity", int)
    return result


def limits_shape(limits) -> list[dict]:
    return [{"capacityUnit": unit, "maxCapacity": count} for unit, count in sorted(limits.items())]


def environment_shape(env: ServiceEnvironment) -> dict:
    limits = {c.capacity_unit.name: c.max_capacity for c in env.capacity_limits.all()}
    return {
        "serviceEnvironmentName": env.name,
        "serviceEnvironmentArn": arn("service-environment", env.name),
        "serviceEnvironmentType": SAGEMAKER_TRAINING,
        "state": env.state,
        "status": "VALID",
        "capacityLimits": limits_shape(limits),
        "tags": env.tags,
    }


def _units_for(actor, limits: dict[str, int]) -> None:
    """AWS counts capacity in instance types, which need no set-up there: make the ones a
    request names (one GPU each until an admin says otherwise)."""
    known = set(CapacityUnit.objects.filter(name__in=list(limits)).values_list("name", flat=True))
    for name in sorted(set(limits) - known):
        services.create_capacity_unit(actor, name=name, description="made by the AWS endpoint")


@operation("CreateServiceEnvironment")
def create_service_environment(actor, body):
    name = aws_name(body, "serviceEnvironmentName")
    if required(body, "serviceEnvironmentType") != SAGEMAKER_TRAINING:
        raise AwsError("serviceEnvironmentType must be SAGEMAKER_TRAINING")
    limits = read_capacity_limits(body)
    if not limits:
        raise AwsError("capacityLimits is required: give at least one capacityUnit")
    tags = typed(body, "tags", dict, {})
    backend = tags.get(BACKEND_TAG, Backend.SIMULATED)
    if backend not in ENDPOINT_BACKENDS:
        raise AwsError(f"tag {BACKEND_TAG} must be one of {', '.join(ENDPOINT_BACKENDS)}")
    require_admin(actor, "create service environments")
    _units_for(actor, limits)
    env = _created(
        lambda: services.create_service_environment(
            actor,
            name=name,
            capacity_limits=limits,
            backend=backend,
            state=one_of(body, "state", State.values, State.ENABLED),
            tags=tags,
        )
    )
    return {"serviceEnvironmentName": env.name, "serviceEnvironmentArn": environment_arn(env)}


def environment_arn(env: ServiceEnvironment) -> str:
    return arn("service-environment", env.name)


@operation("UpdateServiceEnvironment")
def update_service_environment(actor, body):
    env = lookups.service_environment(required(body, "serviceEnvironment"))
    limits = read_capacity_limits(body)
    if limits:
        require_admin(actor, "change service environments")
        _units_for(actor, limits)
    services.update_service_environment(
        actor, env, capacity_limits=limits or None, state=one_of(body, "state", State.values)
    )
    return {"serviceEnvironmentName": env.name, "serviceEnvironmentArn": environment_arn(env)}


@operation("DescribeServiceEnvironments")
def describe_service_environments(actor, body):
    envs = ServiceEnvironment.objects.prefetch_related("capacity_limits__capacity_unit")
    if wanted := typed(body, "serviceEnvironments", list):
        envs = envs.filter(name__in=[lookups.environment_name(value) for value in wanted])
    return paged(
        body,
        envs.order_by("name"),
        "DescribeServiceEnvironments",
        "serviceEnvironments",
        environment_shape,
    )


@operation("DeleteServiceEnvironment")
def delete_service_environment(actor, body):
    env = lookups.service_environment(required(body, "serviceEnvironment"))
    _require_disabled_to_delete(actor, env, "service environment")
    if env.job_queues.exists():
        raise AwsError(
            f"Service environment {env.name} is used by job queues "
            f"{', '.join(env.job_queues.values_list('name', flat=True))}; delete them first"
        )
    services.delete_resource(actor, env, "service environment")
    return {}


# Job queues


def _time_limit_actions(body: dict) -> list | None:
    actions = typed(body, "jobStateTimeLimitActions", list)
    if actions is None:
        return None
    if not all(isinstance(a, dict) for a in actions):
        raise AwsError("each of jobStateTimeLimitActions is an object")
    return [
        {
            "reason": a.get("reason"),
            "state": a.get("state", "RUNNABLE"),
            "max_time_seconds": a.get("maxTimeSeconds"),
            "action": a.get("action", "TERMINATE"),
        }
        for a in actions
    ]


def _environment_of(body: dict) -> ServiceEnvironment | None:
    if body.get("computeEnvironmentOrder"):
        raise AwsError(
            "computeEnvironmentOrder is not supported: quotaportal queues run on a service "
            "environment (serviceEnvironmentOrder)"
        )
    order = typed(body, "serviceEnvironmentOrder", list)
    if order is None:
        return None
    if len(order) != 1 or not isinstance(order[0], dict):
        raise AwsError("serviceEnvironmentOrder must name exactly one service environment")
    return lookups.service_environment(required(order[0], "serviceEnvironment"))


def queue_shape(queue: JobQueue) -> dict:
    return {
        "jobQueueName": queue.name,
        "jobQueueArn": arn("job-queue", queue.name),
        "state": queue.state,
        "status": "VALID",
        "statusReason": "JobQueue Healthy",
        "priority": queue.priority,
        "schedulingPolicyArn": arn("scheduling-policy", queue.scheduling_policy.name),
        "computeEnvironmentOrder": [],
        "serviceEnvironmentOrder": [
            {"order": 1, "serviceEnvironment": environment_arn(queue.service_environment)}
        ],
        "jobQueueType": SAGEMAKER_TRAINING,
        "jobStateTimeLimitActions": [
            {
                "reason": a["reason"],
                "state": a.get("state", "RUNNABLE"),
                "maxTimeSeconds": a["max_time_seconds"],
                "action": a.get("action", "TERMINATE"),
            }
            for a in queue.job_state_time_limit_actions
        ],
        "tags": queue.tags,
    }


@operation("CreateJobQueue")
def create_job_queue(actor, body):
    name = aws_name(body, "jobQueueName")
    priority = required(body, "priority", int)
    one_of(body, "jobQueueType", [SAGEMAKER_TRAINING])
    env = _environment_of(body)
    if env is None:
        raise AwsError("serviceEnvironmentOrder is required: name one service environment")
    policy_arn = typed(body, "schedulingPolicyArn", str)
    if policy_arn is None:
        raise AwsError("schedulingPolicyArn is required: quotaportal queues use quota shares")
    queue = _created(
        lambda: services.create_job_queue(
            actor,
            name=name,
            priority=priority,
            scheduling_policy=lookups.scheduling_policy(policy_arn),
            service_environment=env,
            state=one_of(body, "state", State.values, State.ENABLED),
            job_state_time_limit_actions=_time_limit_actions(body),
            tags=typed(body, "tags", dict),
        )
    )
    return {"jobQueueName": queue.name, "jobQueueArn": arn("job-queue", queue.name)}


@operation("UpdateJobQueue")
def update_job_queue(actor, body):
    queue = lookups.job_queue(required(body, "jobQueue"))
    changes = {}
    if (env := _environment_of(body)) is not None and env.pk != queue.service_environment_id:
        raise AwsError("a job queue's service environment cannot be changed")
    if (state := one_of(body, "state", State.values)) is not None:
        changes["state"] = state
    if (priority := typed(body, "priority", int)) is not None:
        changes["priority"] = priority
    if (policy_arn := typed(body, "schedulingPolicyArn", str)) is not None:
        changes["scheduling_policy"] = lookups.scheduling_policy(policy_arn)
    if (actions := _time_limit_actions(body)) is not None:
        changes["job_state_time_limit_actions"] = actions
    services.update_job_queue(actor, queue, **changes)
    return {"jobQueueName": queue.name, "jobQueueArn": arn("job-queue", queue.name)}


@operation("DescribeJobQueues")
def describe_job_queues(actor, body):
    queues = JobQueue.objects.select_related("scheduling_policy", "service_environment")
    if wanted := typed(body, "jobQueues", list):
        queues = queues.filter(name__in=[lookups.queue_name(value) for value in wanted])
    return paged(body, queues.order_by("name"), "DescribeJobQueues", "jobQueues", queue_shape)


@operation("DeleteJobQueue")
def delete_job_queue(actor, body):
    queue = lookups.job_queue(required(body, "jobQueue"))
    _require_disabled_to_delete(actor, queue, "job queue")
    services.delete_resource(actor, queue, "job queue")
    return {}
