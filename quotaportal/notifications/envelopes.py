"""What an audit event says to the outside: AWS Batch's EventBridge events for service jobs
(a state change; a preemption's start and completion), a Slack message, an e-mail.

An event's `detail` resembles DescribeServiceJob, as AWS's does (without tags and the
request payload), with the status and reason the job had at that event.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from quotaportal.awsbatch.described_jobs import describe_shape, job_arn
from quotaportal.notifications.models import DetailType
from quotaportal.quotas.models import Event, EventKind, Job, JobStatus

# Audit kinds that move a job to a status, and the status.
STATUS_AFTER = {
    EventKind.SUBMITTED: JobStatus.RUNNABLE,
    EventKind.RELEASED: JobStatus.RUNNABLE,
    EventKind.DISPATCHED: JobStatus.SCHEDULED,
    EventKind.STARTING: JobStatus.STARTING,
    EventKind.STARTED: JobStatus.RUNNING,
    EventKind.RETRIED: JobStatus.RUNNABLE,
    EventKind.SUCCEEDED: JobStatus.SUCCEEDED,
    EventKind.FAILED: JobStatus.FAILED,
    EventKind.TERMINATED: JobStatus.FAILED,
}
PREEMPTION_STARTED = {
    EventKind.PREEMPTED_CROSS_SHARE,
    EventKind.PREEMPTED_IN_SHARE,
    EventKind.PREEMPTED_CAPACITY,
}
# Stable ids: a retried delivery carries the id of its first try, so receivers can drop
# duplicates (delivery is at least once).
ID_NAMESPACE = uuid.UUID("6f1c3f39-5d55-4c07-9a4b-8f0f2b8e7f21")


@dataclass(frozen=True)
class Notice:
    """One outside event made from an audit event."""

    detail_type: str
    status: str
    envelope: dict

    def json(self) -> str:
        return json.dumps(self.envelope, separators=(",", ":"), sort_keys=True)


def notices(event: Event, job: Job) -> list[Notice]:
    """The outside events an audit event makes (none for the kinds that change no job)."""
    kind, detail = event.kind, event.detail or {}
    made = []
    if kind in PREEMPTION_STARTED:
        made.append(_preemption_started(event, job))
        # Exhausted: its FAILED event follows. Not stopped at once: it stays RUNNING until
        # its ranks have stopped (PREEMPTION_COMPLETED with `requeued`).
        if detail.get("stopped") and not detail.get("exhausted"):
            made.append(_state_change(event, job, JobStatus.RUNNABLE))
        if detail.get("stopped"):  # its attempt stopped at once: the preemption completed
            after = JobStatus.FAILED if detail.get("exhausted") else JobStatus.RUNNABLE
            made.append(_preemption_completed(event, job, after))
    elif kind == EventKind.PREEMPTION_COMPLETED:
        after = JobStatus.RUNNABLE if detail.get("requeued") else job.status
        made.append(_preemption_completed(event, job, after))
        if detail.get("requeued"):
            made.append(_state_change(event, job, JobStatus.RUNNABLE))
    elif kind in STATUS_AFTER:
        status = STATUS_AFTER[kind]
        if kind == EventKind.DISPATCHED and detail.get("status") == JobStatus.STARTING:
            status = JobStatus.STARTING  # a remote job seen already starting
        if kind == EventKind.SUBMITTED and detail.get("status") == JobStatus.PENDING:
            status = JobStatus.PENDING  # waiting on its dependencies, or its array's turn
        made.append(_state_change(event, job, status))
    return made


def _envelope(event: Event, job: Job, detail_type: str, detail: dict) -> dict:
    return {
        "version": "0",
        "id": str(uuid.uuid5(ID_NAMESPACE, f"{event.pk}:{detail_type}")),
        "detail-type": detail_type,
        "source": "aws.batch",
        "account": settings.QP_AWS_ACCOUNT_ID,
        "time": event.time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": settings.QP_AWS_REGION,
        "resources": [job_arn(job)],
        "detail": detail,
    }


def _state_change(event: Event, job: Job, status: str) -> Notice:
    detail = describe_shape(job)
    detail.pop("tags", None)
    detail.pop("serviceRequestPayload", None)
    detail["status"] = status
    reason = (event.detail or {}).get("reason") or _reason_now(job, status)
    if reason:
        detail["statusReason"] = reason
    else:
        detail.pop("statusReason", None)
    detail["shareIdentifier"] = job.share_name
    detail_type = DetailType.STATE_CHANGE
    return Notice(detail_type, status, _envelope(event, job, detail_type, detail))


def _reason_now(job: Job, status: str) -> str:
    """The job's status reason, when it still has the status this event gave it."""
    return job.status_reason if job.status == status else ""


def _preemption_started(event: Event, job: Job) -> Notice:
    status = (event.detail or {}).get("status") or JobStatus.RUNNING
    detail = {
        "statusReason": (event.detail or {}).get("reason", ""),
        "preemptedJobArn": job_arn(job),
        "status": status,
    }
    detail_type = DetailType.PREEMPTION_STARTED
    return Notice(detail_type, status, _envelope(event, job, detail_type, detail))


def _preemption_completed(event: Event, job: Job, status: str) -> Notice:
    summary = describe_shape(job).get("preemptionSummary") or {
        "preemptedAttemptCount": (event.detail or {}).get("preempted_count", 0),
        "recentPreemptedAttempts": [],
    }
    detail = {
        "preemptedJobArn": job_arn(job),
        "preemptionSummary": summary,
        "status": status,
    }
    detail_type = DetailType.PREEMPTION_COMPLETED
    return Notice(detail_type, status, _envelope(event, job, detail_type, detail))


def job_url(job: Job) -> str:
    return settings.QP_PUBLIC_URL.rstrip("/") + reverse("job-detail", args=[job.pk])


HEADLINES = {
    DetailType.PREEMPTION_STARTED: "was preempted",
    DetailType.PREEMPTION_COMPLETED: "stopped after its preemption",
}


def headline(notice: Notice, job: Job) -> str:
    """One line for people: "Job train-7 (queue gpu, share ml) was preempted"."""
    what = HEADLINES.get(notice.detail_type) or f"is {notice.status}"
    return f"Job {job.name} (queue {job.job_queue.name}, share {job.share_name}) {what}"


def reason_of(notice: Notice) -> str:
    return notice.envelope["detail"].get("statusReason") or ""


def slack_body(notice: Notice, job: Job) -> str:
    """A Slack incoming-webhook message: the headline, the reason, a link to the job."""
    lines = [f"*{headline(notice, job)}*"]
    if reason := reason_of(notice):
        lines.append(reason)
    lines.append(f"<{job_url(job)}|Open the job>")
    return json.dumps({"text": "\n".join(lines)}, separators=(",", ":"))


def email_text(notice: Notice, job: Job) -> tuple[str, str]:
    """Subject and plain text of the e-mail to the job's submitter."""
    subject = f"[quotaportal] {headline(notice, job)}"
    lines = [headline(notice, job) + "."]
    if reason := reason_of(notice):
        lines.append(f"Reason: {reason}")
    lines += ["", f"The job: {job_url(job)}", "", "You receive this because you asked for it on"]
    lines.append(
        f"your account page: {settings.QP_PUBLIC_URL.rstrip('/')}{reverse('account-notifications')}"
    )
    return subject, "\n".join(lines)
