"""Quota shares (AWS Batch's CreateQuotaShare family)."""

from __future__ import annotations

from quotaportal.awsbatch.conventions import TEAM_TAG, arn, share_arn
from quotaportal.awsbatch.endpoint import lookups
from quotaportal.awsbatch.endpoint.operations.registry import operation
from quotaportal.awsbatch.endpoint.operations.resources import limits_shape, read_capacity_limits
from quotaportal.awsbatch.endpoint.wire import (
    AwsError,
    aws_name,
    one_of,
    paged,
    required,
    typed,
)
from quotaportal.quotas import services
from quotaportal.quotas.models import QuotaShare, State, Strategy, Team
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.shares import limits_of

PREEMPTION = {"ENABLED": True, "DISABLED": False}


def share_shape(share: QuotaShare, with_tags: bool = True) -> dict:
    shape = {
        "quotaShareName": share.name,
        "quotaShareArn": share_arn(share.job_queue.name, share.name),
        "jobQueueArn": arn("job-queue", share.job_queue.name),
        "capacityLimits": limits_shape(limits_of(share)),
        "resourceSharingConfiguration": {
            "strategy": share.sharing_strategy,
            "borrowLimit": share.borrow_limit,
        },
        "preemptionConfiguration": {
            "inSharePreemption": "ENABLED" if share.in_share_preemption else "DISABLED"
        },
        "state": share.state,
        "status": "VALID",
    }
    if with_tags:
        shape["tags"] = share.tags
    return shape


def _sharing(body: dict, required_now: bool) -> tuple[str | None, int | None]:
    config = (required if required_now else typed)(body, "resourceSharingConfiguration", dict)
    if config is None:
        return None, None
    strategy = one_of(config, "strategy", Strategy.values)
    if strategy is None:
        raise AwsError("resourceSharingConfiguration.strategy is required")
    return strategy, typed(config, "borrowLimit", int)


def _in_share_preemption(body: dict, required_now: bool) -> bool | None:
    config = (required if required_now else typed)(body, "preemptionConfiguration", dict)
    if config is None:
        return None
    value = one_of(config, "inSharePreemption", list(PREEMPTION))
    if value is None:
        raise AwsError("preemptionConfiguration.inSharePreemption is required")
    return PREEMPTION[value]


def _team_for(actor, name: str) -> Team:
    """The team that owns a share made through the endpoint: the one its tag names, else a
    team of the share's own name, made when missing (AWS has no teams)."""
    team = Team.objects.filter(name=name).first()
    return team or services.create_team(actor, name=name)


@operation("CreateQuotaShare")
def create_quota_share(actor, body):
    name = aws_name(body, "quotaShareName")
    queue = lookups.job_queue(required(body, "jobQueue"))
    limits = read_capacity_limits(body)
    if not limits:
        raise AwsError("capacityLimits is required: give 1 to 5 capacity limits")
    strategy, borrow_limit = _sharing(body, required_now=True)
    in_share = _in_share_preemption(body, required_now=True)
    tags = typed(body, "tags", dict, {})
    team_name = tags.get(TEAM_TAG, name)
    if not isinstance(team_name, str) or not team_name:
        raise AwsError(f"tag {TEAM_TAG} must name a team")
    require_admin(actor, "create quota shares")  # before a team is made for the share
    share = services.create_share(
        actor,
        job_queue=queue,
        name=name,
        team=_team_for(actor, team_name),
        capacity_limits=limits,
        sharing_strategy=strategy,
        borrow_limit=borrow_limit,
        in_share_preemption=in_share,
        state=one_of(body, "state", State.values, State.ENABLED),
        tags=tags,
    )
    return {"quotaShareName": share.name, "quotaShareArn": share_arn(queue.name, share.name)}


@operation("UpdateQuotaShare")
def update_quota_share(actor, body):
    share = lookups.quota_share(required(body, "quotaShareArn"))
    changes = {}
    if limits := read_capacity_limits(body):
        changes["capacity_limits"] = limits
    strategy, borrow_limit = _sharing(body, required_now=False)
    if strategy is not None:
        changes["sharing_strategy"] = strategy
        # AWS replaces the whole configuration: a strategy given alone drops an old limit.
        changes["borrow_limit"] = -1 if borrow_limit is None else borrow_limit
    if (in_share := _in_share_preemption(body, required_now=False)) is not None:
        changes["in_share_preemption"] = in_share
    if (state := one_of(body, "state", State.values)) is not None:
        changes["state"] = state
    share = services.update_share(actor, share, **changes)
    return {
        "quotaShareName": share.name,
        "quotaShareArn": share_arn(share.job_queue.name, share.name),
    }


@operation("DescribeQuotaShare")
def describe_quota_share(actor, body):
    return share_shape(lookups.quota_share(required(body, "quotaShareArn")))


@operation("ListQuotaShares")
def list_quota_shares(actor, body):
    queue = lookups.job_queue(required(body, "jobQueue"))
    shares = QuotaShare.objects.filter(job_queue=queue).select_related("job_queue")
    return paged(
        body,
        shares.order_by("name"),
        "ListQuotaShares",
        "quotaShares",
        lambda share: share_shape(share, with_tags=False),
    )


@operation("DeleteQuotaShare")
def delete_quota_share(actor, body):
    services.delete_share(actor, lookups.quota_share(required(body, "quotaShareArn")))
    return {}
