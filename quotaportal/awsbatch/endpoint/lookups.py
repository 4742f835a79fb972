"""Finding what a request names: by name or by ARN, with AWS-style messages when absent."""

from __future__ import annotations

import uuid

from quotaportal.awsbatch.endpoint.wire import AwsError, split_arn
from quotaportal.quotas import selectors
from quotaportal.quotas.models import (
    Job,
    JobQueue,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
)


def _name(value: str, kind: str) -> str:
    parsed = split_arn(value)
    if parsed is None:
        return value
    if parsed[0] != kind:
        raise AwsError(f"{value} is not the ARN of a {kind.replace('-', ' ')}")
    return parsed[1]


def queue_name(value) -> str:
    return _name(_text(value), "job-queue")


def environment_name(value) -> str:
    return _name(_text(value), "service-environment")


def policy_name(value) -> str:
    return _name(_text(value), "scheduling-policy")


def _text(value) -> str:
    if not isinstance(value, str) or not value:
        raise AwsError(f"{value!r} is not a name or an ARN")
    return value


def _existing(queryset, name: str, label: str):
    found = queryset.filter(name=name).first()
    if found is None:
        raise AwsError(f"{label} {name} does not exist")
    return found


def job_queue(value: str) -> JobQueue:
    queues = JobQueue.objects.select_related("service_environment")
    return _existing(queues, queue_name(value), "Job queue")


def service_environment(value: str) -> ServiceEnvironment:
    return _existing(ServiceEnvironment.objects, environment_name(value), "Service environment")


def scheduling_policy(value: str) -> SchedulingPolicy:
    return _existing(SchedulingPolicy.objects, policy_name(value), "Scheduling policy")


def quota_share(value: str) -> QuotaShare:
    parsed = split_arn(value)
    if parsed is None or parsed[0] != "job-queue" or "/quota-share/" not in parsed[1]:
        raise AwsError(
            f"{value} is not a quota share ARN (arn:aws:batch:REGION:ACCOUNT:job-queue/"
            "QUEUE/quota-share/NAME)"
        )
    queue_name, _, share_name = parsed[1].partition("/quota-share/")
    share = (
        QuotaShare.objects.select_related("job_queue", "team")
        .filter(job_queue__name=queue_name, name=share_name)
        .first()
    )
    if share is None:
        raise AwsError(f"Quota share {share_name} does not exist in job queue {queue_name}")
    return share


def job_id(value: str) -> uuid.UUID | None:
    """The UUID a jobId or service-job ARN names; None when it names none."""
    parsed = split_arn(value)
    if parsed is not None:
        if parsed[0] != "service-job":
            return None
        value = parsed[1]
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def service_job(actor, value: str) -> Job:
    job = None
    if (key := job_id(value)) is not None:
        job = selectors.visible_jobs(actor).filter(pk=key).first()
    if job is None:
        raise AwsError(f"Service job {value} does not exist")
    return job
