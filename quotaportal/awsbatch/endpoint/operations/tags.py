"""TagResource, UntagResource and ListTagsForResource: tags of any resource, by its ARN."""

from __future__ import annotations

from quotaportal.awsbatch.endpoint import lookups
from quotaportal.awsbatch.endpoint.wire import AwsError, required, split_arn
from quotaportal.quotas import services


def resource(actor, resource_arn: str):
    """The policy, environment, queue, share or job an ARN names."""
    parsed = split_arn(resource_arn)
    if parsed is None:
        raise AwsError(f"{resource_arn} is not an AWS Batch ARN")
    kind, rest = parsed
    if kind == "job-queue" and "/quota-share/" in rest:
        return lookups.quota_share(resource_arn)
    finders = {
        "scheduling-policy": lookups.scheduling_policy,
        "service-environment": lookups.service_environment,
        "job-queue": lookups.job_queue,
        "service-job": lambda value: lookups.service_job(actor, value),
    }
    if kind not in finders:
        raise AwsError(f"{resource_arn} names no resource that takes tags")
    return finders[kind](resource_arn)


def list_tags(actor, resource_arn: str, body: dict, keys: list[str]) -> dict:
    return {"tags": resource(actor, resource_arn).tags}


def tag(actor, resource_arn: str, body: dict, keys: list[str]) -> dict:
    services.tag_resource(actor, resource(actor, resource_arn), required(body, "tags", dict))
    return {}


def untag(actor, resource_arn: str, body: dict, keys: list[str]) -> dict:
    if not keys:
        raise AwsError("tagKeys is required: name the tags to remove")
    services.untag_resource(actor, resource(actor, resource_arn), keys)
    return {}


BY_METHOD = {"GET": list_tags, "POST": tag, "DELETE": untag}
