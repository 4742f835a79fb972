"""Service jobs: submit, change priority, describe, list, terminate (AWS Batch's
SubmitServiceJob family)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q

from quotaportal.awsbatch.conventions import EPOCH, SAGEMAKER_TRAINING
from quotaportal.awsbatch.described_jobs import (
    describe_shape,
    job_arn,
    summary_shape,
)
from quotaportal.awsbatch.endpoint import lookups
from quotaportal.awsbatch.endpoint.operations.payload import (
    capacity_of,
    command_of,
    read_payload,
    simulated_seconds,
)
from quotaportal.awsbatch.endpoint.operations.registry import operation
from quotaportal.awsbatch.endpoint.wire import (
    AwsError,
    aws_name,
    from_service_error,
    page,
    required,
    typed,
)
from quotaportal.quotas import selectors, services
from quotaportal.quotas.errors import Conflict, ServiceError
from quotaportal.quotas.models import Backend, JobStatus, shown_status_is

MAX_TERMINATE_BATCH = 50


def _retry(body: dict) -> tuple[int, list]:
    strategy = typed(body, "retryStrategy", dict)
    if strategy is None:
        return 1, []
    attempts = required(strategy, "attempts", int)
    rules = typed(strategy, "evaluateOnExit", list, [])
    if not all(isinstance(rule, dict) for rule in rules):
        raise AwsError("each of retryStrategy.evaluateOnExit is an object {action, onStatusReason}")
    return attempts, [
        {
            "action": str(rule.get("action", "")).upper(),
            "on_status_reason": rule.get("onStatusReason", "*"),
        }
        for rule in rules
    ]


@operation("SubmitServiceJob")
def submit_service_job(actor, body):
    name = aws_name(body, "jobName")
    queue = lookups.job_queue(required(body, "jobQueue"))
    if required(body, "serviceJobType") != SAGEMAKER_TRAINING:
        raise AwsError("serviceJobType must be SAGEMAKER_TRAINING")
    if body.get("shareIdentifier") is not None:
        raise AwsError(
            f"shareIdentifier is for fair-share queues; job queue {queue.name} has a quota "
            "share policy: give quotaShareName"
        )
    share = typed(body, "quotaShareName", str)
    if share is None:
        raise AwsError(f"quotaShareName is required: job queue {queue.name} uses quota shares")
    payload = read_payload(body)
    unit, count = capacity_of(payload)
    tags = typed(body, "tags", dict, {})
    local = queue.service_environment.backend == Backend.LOCAL
    attempts, rules = _retry(body)
    preemption = typed(body, "preemptionConfiguration", dict, {})
    timeout = typed(body, "timeoutConfig", dict, {})
    job = services.submit_job(
        actor,
        job_queue=queue,
        quota_share=share,
        capacity_unit=unit,
        name=name,
        quantity=count,
        scheduling_priority=typed(body, "schedulingPriority", int, 0),
        command=command_of(payload, local),
        service_request_payload=payload,
        retry_attempts=attempts,
        evaluate_on_exit=rules,
        preemption_retries_before_termination=typed(
            preemption, "preemptionRetriesBeforeTermination", int
        ),
        attempt_duration_seconds=typed(timeout, "attemptDurationSeconds", int),
        simulated_duration_seconds=None if local else simulated_seconds(payload, tags),
        client_token=typed(body, "clientToken", str),
        tags=tags,
    )
    return {"jobArn": job_arn(job), "jobName": job.name, "jobId": str(job.pk)}


@operation("UpdateServiceJob")
def update_service_job(actor, body):
    job = lookups.service_job(actor, required(body, "jobId"))
    services.set_priority(actor, job, required(body, "schedulingPriority", int))
    return {"jobArn": job_arn(job), "jobName": job.name, "jobId": str(job.pk)}


# Describing jobs


@operation("DescribeServiceJob")
def describe_service_job(actor, body):
    job = lookups.service_job(actor, required(body, "jobId"))
    return describe_shape(job)


# Listing jobs

FILTERS = (
    "JOB_NAME",
    "BEFORE_CREATED_AT",
    "AFTER_CREATED_AT",
    "SHARE_IDENTIFIER",
    "QUOTA_SHARE_NAME",
)


def _filtered(jobs, body: dict):
    """AWS's rules: one filter at a time; a filter makes jobStatus ignored, except a share
    filter, which goes with it; no jobStatus at all means RUNNING."""
    filters = typed(body, "filters", list, [])
    status = typed(body, "jobStatus", str, JobStatus.RUNNING)
    if status not in JobStatus.values:
        raise AwsError(f"jobStatus must be one of {', '.join(JobStatus.values)}")
    if len(filters) > 1:
        raise AwsError("give at most one filter")
    if not filters:
        return jobs.filter(shown_status_is(status))
    rule = filters[0]
    if not isinstance(rule, dict):
        raise AwsError("a filter is an object {name, values}")
    name = required(rule, "name")
    values = required(rule, "values", list)
    if name not in FILTERS:
        raise AwsError(f"filter name must be one of {', '.join(FILTERS)}")
    if not values or not all(isinstance(v, str) and v for v in values):
        raise AwsError("filter values must be a non-empty list of strings")
    if name == "QUOTA_SHARE_NAME":
        return jobs.filter(shown_status_is(status), share_name__in=values)
    if name == "SHARE_IDENTIFIER":
        return jobs.none()  # quota-share queues have no fair-share identifiers
    if name == "JOB_NAME":
        return jobs.filter(_name_matches(values))
    moment = _moment(values[0], name)
    if name == "BEFORE_CREATED_AT":
        return jobs.filter(created_at__lt=moment)
    # Times are whole milliseconds on the wire: "after" starts at the next one.
    return jobs.filter(created_at__gte=moment + timedelta(milliseconds=1))


def _name_matches(values):
    wanted = Q()
    for value in values:
        if value.endswith("*"):
            wanted |= Q(name__istartswith=value[:-1])
        else:
            wanted |= Q(name__iexact=value)
    return wanted


def _moment(value: str, name: str) -> datetime:
    if not value.isdigit() or len(value) > 15:
        raise AwsError(f"{name} takes a time in milliseconds since the epoch, as a string")
    return EPOCH + timedelta(milliseconds=int(value))  # exact, unlike a float division


@operation("ListServiceJobs")
def list_service_jobs(actor, body):
    jobs = selectors.visible_jobs(actor)
    if (queue := typed(body, "jobQueue", str)) is not None:
        jobs = jobs.filter(job_queue=lookups.job_queue(queue))
    jobs = _filtered(jobs, body).order_by("-created_at", "-id").prefetch_related("attempts")
    chunk, following = page(body, jobs, "ListServiceJobs")
    answer = {"jobSummaryList": [summary_shape(job) for job in chunk]}
    if following:
        answer["nextToken"] = following
    return answer


# Ending jobs


def _reason(body: dict) -> str:
    reason = required(body, "reason")
    if len(reason) > 1024:
        raise AwsError("reason must be at most 1024 characters")
    return reason


@operation("TerminateServiceJob")
def terminate_service_job(actor, body):
    job = lookups.service_job(actor, required(body, "jobId"))
    services.terminate_job(actor, job, _reason(body))
    return {}


@operation("TerminateServiceJobs")
def terminate_service_jobs(actor, body):
    """Up to 50 at once. As AWS does, jobs that cannot be found (or have already ended) count
    as done; a job the caller may not touch is reported in `errors`."""
    wanted = required(body, "jobs", list)
    reason = _reason(body)
    if not 1 <= len(wanted) <= MAX_TERMINATE_BATCH:
        raise AwsError(f"jobs must list 1 to {MAX_TERMINATE_BATCH} job IDs")
    successful, errors = [], []
    for value in wanted:
        if not isinstance(value, str):
            raise AwsError("jobs must be a list of job IDs or ARNs")
        try:
            job = lookups.service_job(actor, value)
            services.terminate_job(actor, job, reason)
        except AwsError:
            pass  # not found: nothing left to terminate
        except Conflict:
            pass  # already ended
        except ServiceError as err:
            failure = from_service_error(err)
            errors.append({"job": value, "code": failure.code, "message": failure.message})
            continue
        successful.append(value)
    return {"successful": successful, "errors": errors}
