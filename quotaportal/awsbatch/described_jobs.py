"""Service jobs as AWS Batch describes and lists them."""

from __future__ import annotations

import json
from datetime import datetime

from django.conf import settings

from quotaportal.awsbatch.conventions import SAGEMAKER_TRAINING, arn, ms
from quotaportal.quotas.models import Job, JobStatus


def job_arn(job: Job) -> str:
    return arn("service-job", str(job.pk))


def _training_job_arn(job: Job, attempt: int) -> str:
    region, account = settings.QP_AWS_REGION, settings.QP_AWS_ACCOUNT_ID
    return f"arn:aws:sagemaker:{region}:{account}:training-job/{job.name}-{attempt}"


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
        "status": job.shown_status,
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


def _still_stopping_since(job: Job, attempts: list[dict]) -> int | None:
    """A preempted job shown RUNNING while its processes stop ran since its last attempt's
    start (the job's own start is cleared with the preemption)."""
    if job.shown_status != job.status and attempts:
        return attempts[-1]["startedAt"]
    return None


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
        # A required member of DescribeServiceJob's output: 0 until the job has started (the
        # sync reads startedAt only from a job that runs or ran).
        "startedAt": ms(job.started_at) or _still_stopping_since(job, attempts) or 0,
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
