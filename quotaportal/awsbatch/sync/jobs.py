"""Jobs between the portal and AWS Batch.

Pushed: new jobs (SubmitServiceJob, clientToken = the portal's job id, so a push retried after
a crash or a lost answer never makes a second job), priority changes (UpdateServiceJob) and
terminations (TerminateServiceJob). Each is a difference between a job row and its RemoteJob,
so nothing is lost while AWS is unreachable: the difference is still there when it returns.

Pulled: ListServiceJobs per active status, page by page; DescribeServiceJob only for jobs whose
status or latest attempt changed, or that left the active lists (they ended); a job AWS holds
that the portal never saw is adopted. GetJobQueueSnapshot gives the queue positions.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.db.models import F

from quotaportal.awsbatch.models import RemoteJob
from quotaportal.awsbatch.sync.client import DRY_RUN_PREFIX, BudgetSpent, Refused
from quotaportal.awsbatch.sync.comparable import (
    AWS_ACTIVE,
    AWS_FINAL,
    latest_attempt,
    moment,
    portal_status,
    remote_state,
    submit_request,
)
from quotaportal.awsbatch.sync.mirror import Sync
from quotaportal.quotas.audit import record
from quotaportal.quotas.models import ACTIVE, CapacityUnit, Event, EventKind, Job, JobStatus
from quotaportal.quotas.services.remote import (
    RemoteState,
    adopt_remote_job,
    record_remote_state,
    reject_unpushed,
)
from quotaportal.quotas.services.resources import create_capacity_unit

LOST = "AWS Batch no longer knows this job"


def push_new_jobs(sync: Sync) -> None:
    waiting = list(
        Job.objects.filter(job_queue=sync.queue, status=JobStatus.RUNNABLE, remote__isnull=True)
        .select_related("capacity_unit", "job_queue", "quota_share")
        .order_by("created_at", "id")[: max(sync.caller.left, 0)]
    )
    submitted = _submitted_priorities([job.pk for job in waiting])
    for job in waiting:
        priority = submitted.get(job.pk, job.scheduling_priority)
        try:
            answer = sync.caller("submit_service_job", **submit_request(job, priority))
        except Refused as err:
            reason = f"AWS Batch refused the job: {err.message}"
            reject_unpushed(job, reason, sync.now)
            sync.note(f"push: job {job.name} refused by AWS ({err.message}); it failed")
            continue
        RemoteJob.objects.create(
            job=job,
            aws_job_id=answer["jobId"],
            aws_job_arn=answer.get("jobArn", ""),
            pushed_at=sync.now,
            pushed_priority=priority,
            aws_status="SUBMITTED",
        )
        record(
            None,
            EventKind.AWS_PUSHED,
            job=job,
            share=job.quota_share,
            when=sync.now,
            what="submitted",
            aws_job_id=answer["jobId"],
        )
        sync.note(f"push: submit job {job.name} ({job.pk})")


def _submitted_priorities(job_ids: list) -> dict:
    """The priority each job was submitted with (its submitted event): part of the request
    that a retried push must repeat exactly."""
    rows = Event.objects.filter(job_id__in=job_ids, kind=EventKind.SUBMITTED).values_list(
        "job_id", "detail"
    )
    return {job_id: detail.get("scheduling_priority", 0) for job_id, detail in rows}


def push_priorities(sync: Sync) -> None:
    changed = (
        _tracked(sync)
        .filter(job__status__in=ACTIVE)
        .exclude(pushed_priority=F("job__scheduling_priority"))
        .select_related("job")
    )
    for remote in changed:
        priority = remote.job.scheduling_priority
        try:
            sync.caller("update_service_job", jobId=remote.aws_job_id, schedulingPriority=priority)
        except Refused as err:  # AWS ended it meanwhile: the pull brings its end
            sync.note(f"push: priority of {remote.job.name} refused ({err.message})")
        remote.pushed_priority = priority
        remote.save(update_fields=["pushed_priority"])
        record(
            None,
            EventKind.AWS_PUSHED,
            job=remote.job,
            when=sync.now,
            what="scheduling priority",
            scheduling_priority=priority,
        )
        sync.note(f"push: priority of job {remote.job.name} → {priority}")


def push_terminations(sync: Sync) -> None:
    ended = (
        _tracked(sync)
        .filter(terminate_sent_at__isnull=True, job__is_terminated=True)
        .select_related("job")
    )
    for remote in ended:
        reason = (remote.job.status_reason or "Terminated in quotaportal")[:1024]
        try:
            sync.caller("terminate_service_job", jobId=remote.aws_job_id, reason=reason)
        except Refused as err:  # gone or ended already: nothing left to stop
            sync.note(f"push: terminate {remote.job.name} refused ({err.message})")
        remote.terminate_sent_at = sync.now
        remote.save(update_fields=["terminate_sent_at"])
        record(None, EventKind.AWS_PUSHED, job=remote.job, when=sync.now, what="terminated")
        sync.note(f"push: terminate job {remote.job.name}")


def pull_jobs(sync: Sync) -> None:
    listed, complete = _listed(sync)
    tracked = list(_tracked(sync).select_related("job"))
    still_waiting = []
    for remote in tracked:
        summary = listed.get(remote.aws_job_id)
        if summary is None:
            if complete:  # it left every active list: it ended (or AWS lost it)
                _describe(sync, remote)
        elif latest_attempt(summary) != remote.latest_attempt:
            _describe(sync, remote)
        elif summary["status"] != remote.aws_status:
            if _waiting(summary["status"]) and _waiting(remote.aws_status):
                # SUBMITTED to RUNNABLE: nothing the portal shows changed, no call needed.
                remote.aws_status = summary["status"]
                still_waiting.append(remote)
            else:
                _describe(sync, remote)
    RemoteJob.objects.bulk_update(still_waiting, ["aws_status"])
    _refresh_stale(sync, [r for r in tracked if r.aws_job_id in listed and r.pulled_at != sync.now])
    known = set(
        RemoteJob.objects.filter(aws_job_id__in=list(listed)).values_list("aws_job_id", flat=True)
    )
    for aws_job_id in listed.keys() - known:
        _adopt(sync, aws_job_id)


# ListServiceJobs summaries carry no priority: a priority changed in AWS (its console, the CLI)
# shows only in DescribeServiceJob. Each sync describes a few waiting jobs not looked at for a
# while, oldest first, so such a change reaches the portal within a few syncs, at a bounded
# cost in calls.
PRIORITY_REFRESH_PER_SYNC = 5
PRIORITY_REFRESH_SECONDS = 60


def _refresh_stale(sync: Sync, listed: list[RemoteJob]) -> None:
    since = sync.now - timedelta(seconds=PRIORITY_REFRESH_SECONDS)
    stale = sorted(
        (r for r in listed if _waiting(r.aws_status) and _last_look(r) < since), key=_last_look
    )
    for remote in stale[: min(PRIORITY_REFRESH_PER_SYNC, max(sync.caller.left - 1, 0))]:
        _describe(sync, remote)


def _last_look(remote: RemoteJob):
    """When the portal last knew the job's details: its last describe, else its push."""
    return remote.pulled_at or remote.pushed_at


def _waiting(aws_status: str) -> bool:
    return portal_status(aws_status) == JobStatus.RUNNABLE


def _tracked(sync: Sync):
    """The queue's jobs AWS holds that are not final on both sides."""
    tracked = RemoteJob.objects.filter(job__job_queue=sync.queue).exclude(aws_status__in=AWS_FINAL)
    if sync.caller.dry_run:  # a check's pretended submits are not in AWS to be pulled
        tracked = tracked.exclude(aws_job_id__startswith=DRY_RUN_PREFIX)
    return tracked


def _listed(sync: Sync) -> tuple[dict, bool]:
    """Every active job AWS lists for the queue; False when the call budget ran out first
    (then nothing may be inferred from a job's absence)."""
    listed = {}
    try:
        for status in AWS_ACTIVE:
            for summary in sync.caller.pages(
                "list_service_jobs",
                "jobSummaryList",
                jobQueue=sync.queue.name,
                jobStatus=status,
                maxResults=100,
            ):
                listed[summary["jobId"]] = summary
    except BudgetSpent:
        return listed, False
    return listed, True


def _describe(sync: Sync, remote: RemoteJob) -> None:
    try:
        detail = sync.caller("describe_service_job", jobId=remote.aws_job_id)
    except Refused as err:
        if not err.not_found:
            raise
        state = RemoteState(status=JobStatus.FAILED, status_reason=LOST, stopped_at=sync.now)
        _record(sync, remote, state, "FAILED", "")
        return
    state = remote_state(detail)
    if remote.job.scheduling_priority != remote.pushed_priority:
        state.scheduling_priority = None  # the portal's newer priority is still to be pushed
    _record(sync, remote, state, detail["status"], latest_attempt(detail))


def _record(sync: Sync, remote: RemoteJob, state: RemoteState, status: str, attempt: str):
    before = remote.aws_status
    kinds = record_remote_state(remote.job, state, sync.now)
    remote.aws_status, remote.latest_attempt, remote.pulled_at = status, attempt, sync.now
    if not _waiting(status):  # a job on its way or ended has no place in the line
        remote.queue_position, remote.share_head = None, False
    if state.scheduling_priority is not None:
        remote.pushed_priority = state.scheduling_priority
    remote.save()
    if kinds or before != status:  # a look that found nothing new is not news
        happened = f" ({', '.join(kinds)})" if kinds else ""
        sync.note(f"pull: job {remote.job.name} {before or '?'} → {status}{happened}")


def _adopt(sync: Sync, aws_job_id: str) -> None:
    detail = sync.caller("describe_service_job", jobId=aws_job_id)
    job = adopt_described(sync.queue, detail, how="submitted to AWS Batch directly")
    if job is None:
        sync.note(f"pull: job {detail.get('jobName')} is in a quota share the portal lacks")
        return
    sync.note(f"pull: adopted job {job.name} ({aws_job_id}), {detail['status']}")


def adopt_described(queue, detail: dict, how: str) -> Job | None:
    """A portal job (with its RemoteJob) for a job AWS described; None when its quota share
    is not one of the queue's."""
    share = queue.quota_shares.filter(name=detail.get("quotaShareName") or "").first()
    if share is None:
        return None
    usage = (detail.get("capacityUsage") or [{}])[0]
    unit_name = usage.get("capacityUnit") or "unknown"
    unit = CapacityUnit.objects.filter(name=unit_name).first() or create_capacity_unit(
        None, name=unit_name, description="found in AWS Batch"
    )
    state = remote_state(detail)
    retry = detail.get("retryStrategy") or {}
    job = adopt_remote_job(
        queue,
        share,
        unit=unit,
        name=detail.get("jobName", ""),
        quantity=int(usage.get("quantity") or 1),
        state=state,
        created_at=moment(detail.get("createdAt")),
        payload=_payload(detail),
        retry_attempts=int(retry.get("attempts") or 1),
        preemption_retries=(detail.get("preemptionConfiguration") or {}).get(
            "preemptionRetriesBeforeTermination"
        ),
        attempt_duration_seconds=(detail.get("timeoutConfig") or {}).get("attemptDurationSeconds"),
        tags=detail.get("tags") or {},
        how=how,
    )
    RemoteJob.objects.create(
        job=job,
        aws_job_id=detail["jobId"],
        aws_job_arn=detail.get("jobArn", ""),
        pushed_priority=state.scheduling_priority or 0,
        aws_status=detail["status"],
        latest_attempt=latest_attempt(detail),
    )
    return job


def _payload(detail: dict) -> dict | None:
    try:
        payload = json.loads(detail.get("serviceRequestPayload") or "null")
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def pull_positions(sync: Sync) -> None:
    """Where AWS places the queue's RUNNABLE jobs (GetJobQueueSnapshot)."""
    if not _tracked(sync).filter(job__status=JobStatus.RUNNABLE).exists():
        return
    snapshot = sync.caller("get_job_queue_snapshot", jobQueue=sync.queue.name)
    front = [j["jobArn"] for j in (snapshot.get("frontOfQueue") or {}).get("jobs", [])]
    shares = (snapshot.get("frontOfQuotaShares") or {}).get("quotaShares") or {}
    heads = {j["jobArn"] for jobs in shares.values() for j in jobs[:1]}
    place = {arn: index for index, arn in enumerate(front, start=1)}
    rows = list(_tracked(sync))
    changed = []
    for row in rows:
        position, head = place.get(row.aws_job_arn), row.aws_job_arn in heads
        if (row.queue_position, row.share_head) != (position, head):
            row.queue_position, row.share_head = position, head
            changed.append(row)
    RemoteJob.objects.bulk_update(changed, ["queue_position", "share_head"])
    if changed:
        sync.note(f"pull: queue positions of {len(changed)} job(s)")
