"""Service jobs and the queue snapshot (AWS Batch's SubmitServiceJob family)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.conf import settings

from quotaportal.api.parsers import unstorable_text
from quotaportal.awsbatch import lookups
from quotaportal.awsbatch.operations import operation
from quotaportal.awsbatch.operations.resources import SAGEMAKER_TRAINING
from quotaportal.awsbatch.wire import (
    EPOCH,
    AwsError,
    arn,
    from_service_error,
    ms,
    page,
    required,
    typed,
)
from quotaportal.quotas import selectors, services
from quotaportal.quotas.errors import Conflict, ServiceError
from quotaportal.quotas.models import Backend, Job, JobStatus

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_TERMINATE_BATCH = 50
COMMAND_VARIABLE = "QP_COMMAND"  # how a LOCAL job sent through the endpoint says what to run
SIMULATED_SECONDS_TAG = "quotaportal:simulated-seconds"
SAGEMAKER_DEFAULT_MAX_RUNTIME = 86_400  # SageMaker's default StoppingCondition


def job_arn(job: Job) -> str:
    return arn("service-job", str(job.pk))


def _training_job_arn(job: Job, attempt: int) -> str:
    region, account = settings.QP_AWS_REGION, settings.QP_AWS_ACCOUNT_ID
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{job.name}-{attempt}"


# Reading the SageMaker CreateTrainingJob request a job carries


def _payload(body: dict) -> dict:
    text = required(body, "serviceRequestPayload")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD_BYTES:
        raise AwsError(f"serviceRequestPayload is larger than {MAX_PAYLOAD_BYTES:,} bytes")
    try:
        payload = json.loads(text)
    except ValueError as err:
        raise AwsError(f"serviceRequestPayload is not valid JSON: {err}") from None
    if not isinstance(payload, dict):
        raise AwsError("serviceRequestPayload must be a JSON object (a CreateTrainingJob request)")
    if problem := unstorable_text(payload, "serviceRequestPayload"):
        raise AwsError(f"{problem}; remove it and send the request again")
    return payload


def capacity_of(payload: dict) -> tuple[str, int]:
    """The instance type and count a training request needs: ResourceConfig.InstanceType ×
    InstanceCount, or its InstanceGroups summed (one instance type per job)."""
    config = payload.get("ResourceConfig")
    missing = AwsError(
        "serviceRequestPayload needs ResourceConfig with InstanceType and InstanceCount, "
        "or with InstanceGroups"
    )
    if not isinstance(config, dict):
        raise missing
    groups = config.get("InstanceGroups")
    if groups:
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise AwsError("ResourceConfig.InstanceGroups must be a list of objects")
        counts = defaultdict(int)
        for group in groups:
            kind, count = group.get("InstanceType"), group.get("InstanceCount")
            counts[kind] += _instance_count(count, "InstanceGroups[].InstanceCount")
        if len(counts) != 1 or not isinstance(next(iter(counts)), str):
            raise AwsError("ResourceConfig.InstanceGroups must all use one InstanceType")
        return next(iter(counts.items()))
    kind, count = config.get("InstanceType"), config.get("InstanceCount")
    if not isinstance(kind, str) or not kind or count is None:
        raise missing
    return kind, _instance_count(count, "ResourceConfig.InstanceCount")


def _instance_count(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AwsError(f"{where} must be a whole number of at least 1")
    return value


def _command(payload: dict, local: bool) -> str:
    environment = payload.get("Environment") or {}
    command = environment.get(COMMAND_VARIABLE, "") if isinstance(environment, dict) else ""
    if local and not command:
        raise AwsError(
            "this job queue runs on quotaportal's own GPU hosts: put the command to run in "
            f'serviceRequestPayload Environment["{COMMAND_VARIABLE}"]'
        )
    if not isinstance(command, str):
        raise AwsError(f'Environment["{COMMAND_VARIABLE}"] must be a string')
    return command


def _simulated_seconds(payload: dict, tags: dict) -> float:
    if SIMULATED_SECONDS_TAG in tags:
        try:
            seconds = float(tags[SIMULATED_SECONDS_TAG])
        except (TypeError, ValueError):
            seconds = -1
        if not 0 <= seconds < float("inf"):
            raise AwsError(f"tag {SIMULATED_SECONDS_TAG} must be a number of seconds, 0 or more")
        return seconds
    stopping = payload.get("StoppingCondition") or {}
    limit = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, dict) else None
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return float(limit)
    return float(SAGEMAKER_DEFAULT_MAX_RUNTIME)


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
    name = required(body, "jobName")
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
    payload = _payload(body)
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
        command=_command(payload, local),
        service_request_payload=payload,
        retry_attempts=attempts,
        evaluate_on_exit=rules,
        preemption_retries_before_termination=typed(
            preemption, "preemptionRetriesBeforeTermination", int
        ),
        attempt_duration_seconds=typed(timeout, "attemptDurationSeconds", int),
        simulated_duration_seconds=None if local else _simulated_seconds(payload, tags),
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


def _status_reason(job: Job) -> str | None:
    if job.status == JobStatus.RUNNABLE and job.pending_reason and not job.status_reason:
        return job.pending_reason  # why it waits, as the last tick saw it
    return job.status_reason or None


def _attempt_shape(job: Job, attempt) -> dict:
    return {
        "serviceResourceId": {
            "name": "TrainingJobArn",
            "value": _training_job_arn(job, attempt.number),
        },
        "startedAt": ms(attempt.started_at),
        "stoppedAt": ms(attempt.stopped_at),
        "statusReason": attempt.status_reason or None,
    }


def _iso_ms(text: str | None) -> int | None:
    return ms(datetime.fromisoformat(text)) if text else None


def _without_none(shape: dict) -> dict:
    return {key: value for key, value in shape.items() if value is not None}


def summary_shape(job: Job) -> dict:
    shape = {
        "jobArn": job_arn(job),
        "jobId": str(job.pk),
        "jobName": job.name,
        "serviceJobType": SAGEMAKER_TRAINING,
        "quotaShareName": job.share_name,
        "status": job.status,
        "statusReason": _status_reason(job),
        "capacityUsage": [{"capacityUnit": job.capacity_unit.name, "quantity": job.quantity}],
        "createdAt": ms(job.created_at),
        "scheduledAt": ms(job.scheduled_at),
        "startedAt": ms(job.started_at),
        "stoppedAt": ms(job.stopped_at),
        "isTerminated": True if job.is_terminated else None,  # AWS: present only when true
    }
    # Attempts are prefetched by the callers that list many jobs.
    if attempts := list(job.attempts.all()):
        shape["latestAttempt"] = {
            "serviceResourceId": {
                "name": "TrainingJobArn",
                "value": _training_job_arn(job, attempts[-1].number),
            }
        }
    return _without_none(shape)


def describe_shape(job: Job) -> dict:
    attempts = [_attempt_shape(job, a) for a in job.attempts.all()]
    shape = {
        **summary_shape(job),
        "attempts": [_without_none(a) for a in attempts],
        "isTerminated": job.is_terminated,
        "jobQueue": arn("job-queue", job.job_queue.name),
        "schedulingPriority": job.scheduling_priority,
        "serviceRequestPayload": json.dumps(job.service_request_payload or {}),
        "retryStrategy": {
            "attempts": job.retry_attempts,
            "evaluateOnExit": [
                {"action": r["action"], "onStatusReason": r.get("on_status_reason", "*")}
                for r in job.evaluate_on_exit
            ],
        },
        "tags": job.tags,
    }
    if job.preemption_retries_before_termination is not None:
        shape["preemptionConfiguration"] = {
            "preemptionRetriesBeforeTermination": job.preemption_retries_before_termination
        }
    if job.attempt_duration_seconds:
        shape["timeoutConfig"] = {"attemptDurationSeconds": job.attempt_duration_seconds}
    if job.preempted_count:
        shape["preemptionSummary"] = {
            "preemptedAttemptCount": job.preempted_count,
            "recentPreemptedAttempts": [
                _without_none(
                    {
                        "serviceResourceId": {
                            "name": "TrainingJobArn",
                            "value": _training_job_arn(job, number),
                        },
                        "startedAt": _iso_ms(p.get("started_at")),
                        "stoppedAt": _iso_ms(p.get("stopped_at")),
                        "statusReason": p.get("status_reason"),
                    }
                )
                for number, p in _numbered_preemptions(job)
            ],
        }
    return shape


def _numbered_preemptions(job: Job):
    """Recent preemptions with the attempt each one stopped (attempts are numbered in order)."""
    preempted = [a.number for a in job.attempts.all() if a.preempted]
    recent = job.recent_preemptions
    numbers = preempted[-len(recent) :] if recent else []
    numbers = [None] * (len(recent) - len(numbers)) + numbers
    return [(n or len(preempted), p) for n, p in zip(numbers, recent, strict=True)]


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
        return jobs.filter(status=status)
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
        return jobs.filter(status=status, share_name__in=values)
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
    from django.db.models import Q

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


# The snapshot


@operation("GetJobQueueSnapshot")
def get_job_queue_snapshot(actor, body):
    queue = lookups.job_queue(required(body, "jobQueue"))
    snapshot = selectors.queue_snapshot(queue)
    updated = ms(snapshot["last_tick_at"]) or ms(datetime.now(tz=UTC))
    arns = {row["id"]: arn("service-job", str(row["id"])) for row in snapshot["front_of_queue"]}

    def entry(row):
        # We do not keep when a job reached its place; the last tick is when it was seen there.
        return {"jobArn": arns[row["id"]], "earliestTimeAtPosition": updated}

    usage = defaultdict(int)
    per_share = []
    for share, units in snapshot["share_utilization"].items():
        used = {unit: figures["used"] for unit, figures in units.items() if figures["used"]}
        for unit, count in used.items():
            usage[unit] += count
        if used:
            per_share.append((sum(used.values()), share, used))
    per_share.sort(key=lambda item: (-item[0], item[1]))
    return {
        "frontOfQueue": {
            "jobs": [entry(row) for row in snapshot["front_of_queue"]],
            "lastUpdatedAt": updated,
        },
        "frontOfQuotaShares": {
            "quotaShares": {
                share: [entry(row)] for share, row in snapshot["front_of_quota_shares"].items()
            },
            "lastUpdatedAt": updated,
        },
        "queueUtilization": {
            "totalCapacityUsage": [
                {"capacityUnit": unit, "quantity": count} for unit, count in sorted(usage.items())
            ],
            "quotaShareUtilization": {
                "topCapacityUtilization": [
                    {
                        "quotaShareName": share,
                        "capacityUsage": [
                            {"capacityUnit": u, "quantity": n} for u, n in sorted(used.items())
                        ],
                    }
                    for _, share, used in per_share[:20]
                ]
            },
            "lastUpdatedAt": updated,
        },
    }
