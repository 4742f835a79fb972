"""Portal rows and AWS answers in one comparable form, and the requests built from rows.

A configuration is a plain dict with sorted, JSON-friendly values, so "what the portal has",
"what AWS has" and "what they last agreed on" compare with ==.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from quotaportal.awsbatch.conventions import EPOCH, SAGEMAKER_TRAINING, SIMULATED_SECONDS_TAG
from quotaportal.quotas.models import FINAL, JobStatus, QuotaShare, State
from quotaportal.quotas.services.remote import RemoteAttempt, RemoteState
from quotaportal.quotas.services.shares import limits_of

# AWS statuses a job holds before it is final; SUBMITTED and PENDING wait like RUNNABLE here.
AWS_ACTIVE = ("SUBMITTED", "PENDING", "RUNNABLE", "SCHEDULED", "STARTING", "RUNNING")
AWS_FINAL = FINAL  # AWS Batch's final statuses are the portal's


def limits_list(limits: dict[str, int]) -> list[dict]:
    return [{"capacityUnit": u, "maxCapacity": n} for u, n in sorted(limits.items())]


def limits_dict(items) -> dict[str, int]:
    return {item["capacityUnit"]: int(item["maxCapacity"]) for item in items or []}


# Quota shares


def share_config(share: QuotaShare, limits: dict[str, int] | None = None) -> dict:
    """`limits` as bridge.share_limits gives them for a whole queue (else they are read)."""
    return {
        "capacity_limits": limits_of(share) if limits is None else dict(limits),
        "sharing_strategy": share.sharing_strategy,
        "borrow_limit": share.borrow_limit,
        "in_share_preemption": share.in_share_preemption,
        "state": share.state,
    }


def aws_share_config(detail: dict) -> dict:
    sharing = detail.get("resourceSharingConfiguration") or {}
    strategy = sharing.get("strategy", "RESERVE")
    preemption = detail.get("preemptionConfiguration") or {}
    return {
        "capacity_limits": limits_dict(detail.get("capacityLimits")),
        "sharing_strategy": strategy,
        "borrow_limit": sharing.get("borrowLimit", -1) if strategy == "LEND_AND_BORROW" else -1,
        "in_share_preemption": preemption.get("inSharePreemption") == "ENABLED",
        "state": detail.get("state", State.ENABLED),
    }


def share_request(config: dict) -> dict:
    """The members of CreateQuotaShare / UpdateQuotaShare that carry a configuration."""
    sharing = {"strategy": config["sharing_strategy"]}
    if config["sharing_strategy"] == "LEND_AND_BORROW":
        sharing["borrowLimit"] = config["borrow_limit"]
    return {
        "capacityLimits": limits_list(config["capacity_limits"]),
        "resourceSharingConfiguration": sharing,
        "preemptionConfiguration": {
            "inSharePreemption": "ENABLED" if config["in_share_preemption"] else "DISABLED"
        },
        "state": config["state"],
    }


# Service environments and job queues


def environment_config(limits: dict[str, int], state: str) -> dict:
    return {"capacity_limits": dict(sorted(limits.items())), "state": state}


def aws_environment_config(detail: dict) -> dict:
    return environment_config(limits_dict(detail.get("capacityLimits")), detail.get("state"))


def queue_config(queue) -> dict:
    return {
        "priority": queue.priority,
        "state": queue.state,
        "job_state_time_limit_actions": [
            {
                "reason": a["reason"],
                "state": a.get("state", "RUNNABLE"),
                "max_time_seconds": a["max_time_seconds"],
                "action": a.get("action", "TERMINATE"),
            }
            for a in queue.job_state_time_limit_actions or []
        ],
    }


def aws_queue_config(detail: dict) -> dict:
    return {
        "priority": detail.get("priority", 1),
        "state": detail.get("state", State.ENABLED),
        "job_state_time_limit_actions": [
            {
                "reason": a.get("reason"),
                "state": a.get("state", "RUNNABLE"),
                "max_time_seconds": a.get("maxTimeSeconds"),
                "action": a.get("action", "TERMINATE"),
            }
            for a in detail.get("jobStateTimeLimitActions") or []
        ],
    }


def time_limit_actions(config: dict) -> list[dict]:
    return [
        {
            "reason": a["reason"],
            "state": a["state"],
            "maxTimeSeconds": a["max_time_seconds"],
            "action": a["action"],
        }
        for a in config["job_state_time_limit_actions"]
    ]


# Jobs


def training_request(job) -> dict:
    """The CreateTrainingJob request AWS passes to SageMaker, carrying the job's capacity as
    ResourceConfig (the payload as submitted, else a minimal one)."""
    payload = dict(job.service_request_payload or {})
    payload.setdefault("TrainingJobName", job.name)
    resources = {
        key: value
        for key, value in (payload.get("ResourceConfig") or {}).items()
        if key != "InstanceGroups"
    }
    resources.update(InstanceType=job.capacity_unit.name, InstanceCount=job.quantity)
    payload["ResourceConfig"] = resources
    return payload


def submit_request(job, priority: int) -> dict:
    """SubmitServiceJob for a portal job. Built only from what never changes after submission
    (and the priority it was submitted with), so a retried push sends the very same request
    and AWS answers with the job the first one made (clientToken = the portal's job id)."""
    tags = dict(job.tags or {})
    if job.simulated_duration_seconds is not None:
        # Honoured by a quotaportal standing in for AWS; AWS itself keeps it as a plain tag.
        tags.setdefault(SIMULATED_SECONDS_TAG, f"{job.simulated_duration_seconds:g}")
    request = {
        "jobName": job.name,
        "jobQueue": job.job_queue.name,
        "serviceJobType": SAGEMAKER_TRAINING,
        "serviceRequestPayload": json.dumps(training_request(job), sort_keys=True),
        "quotaShareName": job.share_name,
        "schedulingPriority": priority,
        "retryStrategy": {
            "attempts": job.retry_attempts,
            "evaluateOnExit": [
                {"action": rule["action"], "onStatusReason": rule.get("on_status_reason", "*")}
                for rule in job.evaluate_on_exit or []
            ],
        },
        "clientToken": str(job.pk),
    }
    if tags:
        request["tags"] = tags
    if job.preemption_retries_before_termination is not None:
        request["preemptionConfiguration"] = {
            "preemptionRetriesBeforeTermination": job.preemption_retries_before_termination
        }
    if job.attempt_duration_seconds:
        request["timeoutConfig"] = {"attemptDurationSeconds": job.attempt_duration_seconds}
    return request


def moment(value) -> datetime | None:
    """AWS Batch sends times as epoch milliseconds (a datetime from some stubs). A required
    time member it has no value for yet (startedAt of a job that never ran) comes as 0: that
    is no time at all, not 1970."""
    if value is None:
        return None
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return None if value == EPOCH else value
    return EPOCH + timedelta(milliseconds=int(value)) if int(value) > 0 else None


def portal_status(aws_status: str) -> str:
    return JobStatus.RUNNABLE if aws_status in ("SUBMITTED", "PENDING") else aws_status


def remote_state(detail: dict) -> RemoteState:
    """A DescribeServiceJob answer as the portal records it."""
    summary = detail.get("preemptionSummary") or {}
    recent = [
        {
            "started_at": _iso(moment(p.get("startedAt"))),
            "stopped_at": _iso(moment(p.get("stoppedAt"))),
            "status_reason": p.get("statusReason", ""),
            "attempt": (p.get("serviceResourceId") or {}).get("value", ""),
        }
        for p in summary.get("recentPreemptedAttempts") or []
    ]
    # startedAt is a required member, so AWS fills it before a job runs: only a job that
    # runs or ran has really started.
    ran = detail["status"] in ("RUNNING", *AWS_FINAL)
    return RemoteState(
        status=portal_status(detail["status"]),
        status_reason=detail.get("statusReason") or "",
        scheduling_priority=detail.get("schedulingPriority"),
        scheduled_at=moment(detail.get("scheduledAt")),
        started_at=moment(detail.get("startedAt")) if ran else None,
        stopped_at=moment(detail.get("stoppedAt")),
        attempts=[
            RemoteAttempt(
                moment(a.get("startedAt")), moment(a.get("stoppedAt")), a.get("statusReason", "")
            )
            for a in detail.get("attempts") or []
        ],
        preempted_count=int(summary.get("preemptedAttemptCount") or 0),
        recent_preemptions=recent,
        is_terminated=bool(detail.get("isTerminated")),
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def latest_attempt(summary: dict) -> str:
    return ((summary.get("latestAttempt") or {}).get("serviceResourceId") or {}).get("value", "")
