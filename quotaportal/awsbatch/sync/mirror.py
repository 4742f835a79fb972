"""Mirroring a queue's configuration into AWS Batch: its scheduling policy, service
environment, job queue and quota shares.

The portal is the source of truth. Each mirrored resource keeps what the portal and AWS last
agreed on (MirroredResource.synced), which tells the two kinds of difference apart:
- AWS still has the agreed value and the portal changed: push the portal's value.
- AWS changed (someone used the AWS console): drift. For a quota share it is held and shown
  on the share's page until an admin keeps the portal's value or adopts AWS's; for the
  environment and queue the portal's value is pushed back and the overwritten one audited.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from quotaportal.awsbatch.conventions import TEAM_TAG
from quotaportal.awsbatch.models import MirroredResource, MirrorKind
from quotaportal.awsbatch.sync.client import Caller
from quotaportal.awsbatch.sync.comparable import (
    SAGEMAKER_TRAINING,
    aws_environment_config,
    aws_queue_config,
    aws_share_config,
    environment_config,
    limits_list,
    queue_config,
    share_config,
    share_request,
    time_limit_actions,
)
from quotaportal.quotas.audit import record
from quotaportal.quotas.models import EventKind, JobQueue, ServiceEnvironment, State
from quotaportal.tick import bridge


@dataclass
class Sync:
    """One sync of one job queue: the calls it may make and what it did, line by line."""

    caller: Caller
    env: ServiceEnvironment
    queue: JobQueue
    now: datetime
    report: list[str] = field(default_factory=list)

    def note(self, line: str) -> None:
        self.report.append(line)


def mirror_row(sync: Sync, kind: str, name: str) -> MirroredResource:
    row, _ = MirroredResource.objects.get_or_create(environment=sync.env, kind=kind, name=name)
    return row


def share_key(queue_name: str, share_name: str) -> str:
    return f"{queue_name}/{share_name}"


def config_due(sync: Sync) -> bool:
    """Whether this tick must look at AWS's configuration: the portal changed something since
    the last agreement, or the last look is older than QP_AWS_CONFIG_SECONDS (drift)."""
    rows = {
        (row.kind, row.name): row
        for row in MirroredResource.objects.filter(environment=sync.env).exclude(
            kind=MirrorKind.POLICY
        )
    }
    queue_row = rows.get((MirrorKind.QUEUE, sync.queue.name))
    if queue_row is None or queue_row.checked_at is None:
        return True
    if sync.now - queue_row.checked_at >= timedelta(seconds=settings.QP_AWS_CONFIG_SECONDS):
        return True
    if queue_row.synced != queue_config(sync.queue):
        return True
    env_row = rows.get((MirrorKind.ENVIRONMENT, sync.env.name))
    if env_row is None or env_row.synced != _environment_now(sync.env):
        return True
    shares = {share_key(sync.queue.name, s.name): s for s in sync.queue.quota_shares.all()}
    limits = bridge.share_limits(sync.queue)
    mirrored = {
        name
        for kind, name in rows
        if kind == MirrorKind.SHARE and name.startswith(f"{sync.queue.name}/")
    }
    if set(shares) != mirrored:
        return True
    return any(
        rows[(MirrorKind.SHARE, key)].aws is None
        and rows[(MirrorKind.SHARE, key)].synced != share_config(share, limits[share.id])
        for key, share in shares.items()
    )


def mirror_config(sync: Sync) -> None:
    policy_arn = _policy(sync)
    env_arn = _environment(sync)
    _queue(sync, policy_arn, env_arn)
    _shares(sync)


def _policy(sync: Sync) -> str:
    """Scheduling policies hold nothing that changes (FIFO is AWS's only strategy): found or
    made once, then known by ARN."""
    policy = sync.queue.scheduling_policy
    row = mirror_row(sync, MirrorKind.POLICY, policy.name)
    if row.arn:
        return row.arn
    found = next(
        (
            item["arn"]
            for item in sync.caller.pages("list_scheduling_policies", "schedulingPolicies")
            if item["arn"].rsplit("/", 1)[-1] == policy.name
        ),
        None,
    )
    if found is None:
        found = sync.caller(
            "create_scheduling_policy",
            name=policy.name,
            quotaSharePolicy={
                "idleResourceAssignmentStrategy": policy.idle_resource_assignment_strategy
            },
        )["arn"]
        _pushed(sync, f"created scheduling policy {policy.name}")
    row.arn = found
    row.save(update_fields=["arn"])
    return found


def _environment_now(env: ServiceEnvironment) -> dict:
    return environment_config(bridge.environment_limits(env), env.state)


def _environment(sync: Sync) -> str:
    env = sync.env
    local = _environment_now(env)
    found = sync.caller("describe_service_environments", serviceEnvironments=[env.name]).get(
        "serviceEnvironments", []
    )
    return _one_resource(
        sync,
        mirror_row(sync, MirrorKind.ENVIRONMENT, env.name),
        local,
        found,
        "serviceEnvironmentArn",
        aws_environment_config,
        create=lambda: sync.caller(
            "create_service_environment",
            serviceEnvironmentName=env.name,
            serviceEnvironmentType=SAGEMAKER_TRAINING,
            capacityLimits=limits_list(local["capacity_limits"]),
            state=local["state"],
        ),
        update=lambda arn: sync.caller(
            "update_service_environment",
            serviceEnvironment=arn,
            capacityLimits=limits_list(local["capacity_limits"]),
            state=local["state"],
        ),
        label=f"service environment {env.name}",
    )


def _queue(sync: Sync, policy_arn: str, env_arn: str) -> None:
    queue = sync.queue
    local = queue_config(queue)
    actions = time_limit_actions(local)
    _one_resource(
        sync,
        mirror_row(sync, MirrorKind.QUEUE, queue.name),
        local,
        sync.caller("describe_job_queues", jobQueues=[queue.name]).get("jobQueues", []),
        "jobQueueArn",
        aws_queue_config,
        create=lambda: sync.caller(
            "create_job_queue",
            jobQueueName=queue.name,
            priority=local["priority"],
            state=local["state"],
            schedulingPolicyArn=policy_arn,
            serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": env_arn}],
            jobQueueType=SAGEMAKER_TRAINING,
            **({"jobStateTimeLimitActions": actions} if actions else {}),
        ),
        update=lambda arn: sync.caller(
            "update_job_queue",
            jobQueue=arn,
            priority=local["priority"],
            state=local["state"],
            jobStateTimeLimitActions=actions,
        ),
        label=f"job queue {queue.name}",
    )


def _one_resource(sync, row, local, found, arn_key, aws_config, *, create, update, label) -> str:
    """An environment or queue: created when AWS has none (`found` is what it described),
    else reconciled, AWS's console changes set back to the portal's. Its ARN."""
    if not found:
        row.arn = create()[arn_key]
        _pushed(sync, f"created {label}")
        _agreed(row, local, sync.now)
        return row.arn
    row.arn = found[0][arn_key]
    _reconcile(
        sync,
        row,
        local,
        aws_config(found[0]),
        lambda: update(row.arn),
        label,
        hold_drift=False,
    )
    return row.arn


def _shares(sync: Sync) -> None:
    queue = sync.queue
    remote = (
        {}  # a check that pretended to create the queue: AWS has no shares of it to list
        if sync.caller.pretended("create_job_queue")
        else {
            item["quotaShareName"]: item
            for item in sync.caller.pages("list_quota_shares", "quotaShares", jobQueue=queue.name)
        }
    )
    prefix = f"{queue.name}/"
    rows = {
        row.name[len(prefix) :]: row
        for row in MirroredResource.objects.filter(
            environment=sync.env, kind=MirrorKind.SHARE, name__startswith=prefix
        )
    }
    shares = list(queue.quota_shares.select_related("team").order_by("name"))
    limits = bridge.share_limits(queue)
    for share in shares:
        row = rows.pop(share.name, None) or mirror_row(
            sync, MirrorKind.SHARE, share_key(queue.name, share.name)
        )
        local = share_config(share, limits[share.id])
        if share.name not in remote:
            row.arn = sync.caller(
                "create_quota_share",
                quotaShareName=share.name,
                jobQueue=queue.name,
                tags={**share.tags, TEAM_TAG: share.team.name},
                **share_request(local),
            )["quotaShareArn"]
            verb = "created again (it was gone from AWS)" if row.synced else "created"
            _pushed(sync, f"{verb} quota share {share.name}")
            row.aws, row.drift_at = None, None
            _agreed(row, local, sync.now)
            continue
        row.arn = remote[share.name]["quotaShareArn"]
        _reconcile(
            sync,
            row,
            local,
            aws_share_config(remote[share.name]),
            lambda arn=row.arn, config=local: sync.caller(
                "update_quota_share", quotaShareArn=arn, **share_request(config)
            ),
            f"quota share {share.name}",
            hold_drift=True,
            share=share,
        )
    for name, row in rows.items():  # mirrored before, deleted in the portal since
        if name in remote:
            _delete_share(sync, remote[name])
        row.delete()
    for name in sorted(set(remote) - {s.name for s in shares} - set(rows)):
        sync.note(f"quota share {name} exists only in AWS; left alone")


def _delete_share(sync: Sync, detail: dict) -> None:
    arn = detail["quotaShareArn"]
    if detail.get("state") != State.DISABLED:
        sync.caller("update_quota_share", quotaShareArn=arn, state=State.DISABLED)
    sync.caller("delete_quota_share", quotaShareArn=arn)
    _pushed(sync, f"deleted quota share {detail['quotaShareName']}")


def _reconcile(sync, row, local, aws, push, label, *, hold_drift, share=None) -> None:
    """Three-way: portal value, AWS value, last agreed value."""
    if aws == local:
        if row.aws is not None:
            row.aws, row.drift_at = None, None  # both sides came to the same value
        _agreed(row, local, sync.now)
        return
    if row.synced and aws == row.synced:  # only the portal changed
        push()
        _pushed(sync, f"updated {label}: {_changes(aws, local)}")
        _agreed(row, local, sync.now)
        return
    if hold_drift:
        if row.aws != aws:  # new drift, or AWS changed again
            row.aws, row.drift_at = aws, sync.now
            record(
                None,
                EventKind.AWS_DRIFT,
                share=share,
                queue=sync.queue,
                resource=label,
                portal=local,
                aws=aws,
            )
            sync.note(f"drift on {label}: AWS has {_changes(local, aws)}; held for an admin")
        row.checked_at = sync.now
        row.save()
        return
    push()
    record(
        None,
        EventKind.AWS_DRIFT,
        queue=sync.queue,
        resource=label,
        portal=local,
        aws=aws,
        resolution="the portal's value was pushed back",
    )
    _pushed(sync, f"updated {label} back to the portal's value: {_changes(aws, local)}")
    _agreed(row, local, sync.now)


def _agreed(row: MirroredResource, config: dict, now) -> None:
    row.synced, row.checked_at = config, now
    row.save()


def _changes(before: dict, after: dict) -> str:
    return ", ".join(
        f"{key} {before.get(key)!r} → {after[key]!r}"
        for key in after
        if before.get(key) != after[key]
    )


def _pushed(sync: Sync, what: str) -> None:
    sync.note(f"push: {what}")
    record(None, EventKind.AWS_PUSHED, queue=sync.queue, what=what)
