"""Adopting an existing AWS Batch setup: a job queue with its scheduling policy, service
environment, quota shares and non-final jobs become portal rows, and what the portal now
holds is recorded as agreed with AWS, so the first sync re-creates nothing.

Everything is read from AWS first and written in one transaction, so an import that fails
halfway (AWS unreachable, a share the portal cannot hold) leaves nothing behind.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from quotaportal.awsbatch.conventions import TEAM_TAG
from quotaportal.awsbatch.models import MirroredResource, MirrorKind
from quotaportal.awsbatch.sync.client import Caller, new_client
from quotaportal.awsbatch.sync.comparable import (
    AWS_ACTIVE,
    aws_environment_config,
    aws_queue_config,
    aws_share_config,
    limits_dict,
)
from quotaportal.awsbatch.sync.jobs import adopt_described
from quotaportal.awsbatch.sync.mirror import share_key
from quotaportal.quotas import services
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    EventKind,
    JobQueue,
    SchedulingPolicy,
    ServiceEnvironment,
    Team,
)
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.environments import aws_connection_errors

READ_BUDGET = 100_000  # an import reads everything once; it is bounded by what AWS holds


@dataclass
class Found:
    queue: dict
    policy: dict
    environment: dict
    shares: list[dict]
    jobs: list[dict]


def import_queue(
    actor,
    queue_name: str,
    *,
    region: str,
    endpoint_url: str = "",
    aws_profile: str = "",
    progress: Callable[[str], None] = lambda line: None,
    client=None,
) -> JobQueue:
    require_admin(actor, "import from AWS Batch")
    if errors := aws_connection_errors(Backend.AWS_BATCH, region, endpoint_url, aws_profile):
        raise InvalidInput(errors)
    if JobQueue.objects.filter(name=queue_name).exists():
        raise Conflict(f"the portal already has a job queue named {queue_name}")
    caller = Caller(client or new_client(region, endpoint_url, aws_profile), READ_BUDGET)
    found = _read(caller, queue_name, progress)
    with transaction.atomic():
        queue = _write(actor, found, (region, endpoint_url, aws_profile), progress)
    progress(
        f"imported job queue {queue.name}: {len(found.shares)} quota share(s), "
        f"{len(found.jobs)} job(s), {caller.calls} AWS calls"
    )
    return queue


def _read(caller: Caller, queue_name: str, progress) -> Found:
    queues = caller("describe_job_queues", jobQueues=[queue_name]).get("jobQueues", [])
    if not queues:
        raise InvalidInput({"job_queue": f"AWS Batch has no job queue named {queue_name}"})
    queue = queues[0]
    policy_arn = queue.get("schedulingPolicyArn")
    order = queue.get("serviceEnvironmentOrder") or []
    if not policy_arn or not order:
        raise InvalidInput(
            {
                "job_queue": f"job queue {queue_name} is not a quota-management queue "
                "(it needs a scheduling policy and a service environment)"
            }
        )
    policies = caller("describe_scheduling_policies", arns=[policy_arn]).get(
        "schedulingPolicies", []
    )
    if not policies or not policies[0].get("quotaSharePolicy"):
        raise InvalidInput(
            {"job_queue": f"job queue {queue_name} uses a fair-share policy, not quota shares"}
        )
    environments = caller(
        "describe_service_environments", serviceEnvironments=[order[0]["serviceEnvironment"]]
    ).get("serviceEnvironments", [])
    if not environments:
        raise InvalidInput({"job_queue": f"the service environment of {queue_name} is gone"})
    # Described one by one: only DescribeQuotaShare carries the tags that name a team.
    shares = [
        caller("describe_quota_share", quotaShareArn=item["quotaShareArn"])
        for item in caller.pages("list_quota_shares", "quotaShares", jobQueue=queue["jobQueueArn"])
    ]
    progress(f"read job queue {queue_name}: {len(shares)} quota share(s)")
    jobs, seen = [], set()
    for status in AWS_ACTIVE:
        for summary in caller.pages(
            "list_service_jobs",
            "jobSummaryList",
            jobQueue=queue["jobQueueArn"],
            jobStatus=status,
            maxResults=100,
        ):
            # The statuses are listed one after another: a job that moves on meanwhile
            # (RUNNABLE, then SCHEDULED) shows up in two lists, and is adopted once.
            if summary["jobId"] in seen:
                continue
            seen.add(summary["jobId"])
            jobs.append(caller("describe_service_job", jobId=summary["jobId"]))
            if len(jobs) % 100 == 0:
                progress(f"read {len(jobs)} job(s)")
    progress(f"read {len(jobs)} non-final job(s)")
    return Found(queue, policies[0], environments[0], shares, jobs)


def _write(actor, found: Found, connection: tuple[str, str, str], progress) -> JobQueue:
    now = timezone.now()
    _units(actor, found)
    env = _environment(actor, found.environment, connection, now)
    policy = SchedulingPolicy.objects.filter(name=found.policy["name"]).first()
    if policy is None:
        policy = services.create_scheduling_policy(actor, name=found.policy["name"])
    _agreed(env, MirrorKind.POLICY, policy.name, found.policy["arn"], {}, now)
    config = aws_queue_config(found.queue)
    queue = services.create_job_queue(
        actor,
        name=found.queue["jobQueueName"],
        scheduling_policy=policy,
        service_environment=env,
        priority=config["priority"],
        state=config["state"],
        job_state_time_limit_actions=config["job_state_time_limit_actions"],
        tags=found.queue.get("tags") or {},
    )
    _agreed(env, MirrorKind.QUEUE, queue.name, found.queue["jobQueueArn"], config, now)
    for detail in found.shares:
        share_config = aws_share_config(detail)
        share = services.create_share(
            actor,
            job_queue=queue,
            name=detail["quotaShareName"],
            team=_team(actor, detail),
            **share_config,
        )
        key = share_key(queue.name, share.name)
        _agreed(env, MirrorKind.SHARE, key, detail["quotaShareArn"], share_config, now)
    progress(f"created job queue {queue.name} with {len(found.shares)} quota share(s)")
    for detail in found.jobs:
        if adopt_described(queue, detail, how="imported from AWS Batch") is None:
            progress(f"skipped job {detail.get('jobName')}: its quota share is not in the queue")
    record(
        actor,
        EventKind.AWS_IMPORTED,
        queue=queue,
        shares=len(found.shares),
        jobs=len(found.jobs),
        region=connection[0],
    )
    return queue


def _units(actor, found: Found) -> None:
    """The instance types AWS counts capacity in become capacity units where missing."""
    names = set(limits_dict(found.environment.get("capacityLimits")))
    for detail in found.shares:
        names |= set(limits_dict(detail.get("capacityLimits")))
    known = set(CapacityUnit.objects.filter(name__in=names).values_list("name", flat=True))
    for name in sorted(names - known):
        services.create_capacity_unit(actor, name=name, description="imported from AWS Batch")


def _environment(actor, detail: dict, connection, now) -> ServiceEnvironment:
    config = aws_environment_config(detail)
    name = detail["serviceEnvironmentName"]
    env = ServiceEnvironment.objects.filter(name=name).first()
    if env is not None and env.backend != Backend.AWS_BATCH:
        raise Conflict(f"the portal's service environment {name} is {env.backend}, not AWS_BATCH")
    if env is not None and _connection_of(env) != tuple(connection):
        # Attaching the queue there would make the next sync push it to that other account.
        raise Conflict(
            f"the portal's service environment {name} syncs with {_describe(_connection_of(env))}, "
            f"not {_describe(connection)}; rename one of them or import from the same place"
        )
    if env is None:
        region, endpoint_url, aws_profile = connection
        env = services.create_service_environment(
            actor,
            name=name,
            capacity_limits=config["capacity_limits"],
            backend=Backend.AWS_BATCH,
            state=config["state"],
            region=region,
            endpoint_url=endpoint_url,
            aws_profile=aws_profile,
            tags=detail.get("tags") or {},
        )
        _agreed(env, MirrorKind.ENVIRONMENT, name, detail["serviceEnvironmentArn"], config, now)
    return env


def _connection_of(env: ServiceEnvironment) -> tuple[str, str, str]:
    return (env.region, env.endpoint_url, env.aws_profile)


def _describe(connection) -> str:
    region, endpoint_url, aws_profile = connection
    where = f"region {region}" + (f" at {endpoint_url}" if endpoint_url else "")
    return where + (f" with profile {aws_profile}" if aws_profile else "")


def _team(actor, detail: dict) -> Team:
    wanted = (detail.get("tags") or {}).get(TEAM_TAG) or detail["quotaShareName"]
    name = re.sub(r"[^-a-zA-Z0-9_]", "-", wanted)[:64]  # team names are slugs
    return Team.objects.filter(name=name).first() or services.create_team(actor, name=name)


def _agreed(env, kind: str, name: str, arn: str, config: dict, now) -> None:
    MirroredResource.objects.update_or_create(
        environment=env,
        kind=kind,
        name=name,
        defaults={"arn": arn, "synced": config, "aws": None, "drift_at": None, "checked_at": now},
    )
