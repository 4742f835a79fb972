"""The AWS_BATCH sync against botocore's Stubber: every call it makes is one the test queued,
in order, so these tests pin which calls a tick sends and what it does with each answer:
throttling and 500s (backoff, other queues tick on), AWS unreachable then back (every job
pushed exactly once), unknown jobs, refusals, drift, the call budget, and jobs adopted."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from quotaportal.awsbatch.models import MirroredResource, MirrorKind, RemoteJob, SyncState
from quotaportal.awsbatch.sync import client as aws_client
from quotaportal.awsbatch.sync.comparable import (
    AWS_ACTIVE,
    share_config,
    submit_request,
)
from quotaportal.awsbatch.sync.drift import resolve_drift
from quotaportal.quotas import services
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import CapacityUnit, Event, EventKind, Job, JobQueue
from quotaportal.quotas.services.connections import backoff_seconds
from tests.awsbatch.sync_builders import ARN, UNIT, Aws, share_detail, submit
from tests.builders import add_share


@pytest.fixture(autouse=True)
def _fresh_clients():
    aws_client.forget_clients()
    yield
    aws_client.forget_clients()


@pytest.fixture
def aws(people):
    services.create_team(people.admin, name="qs2")
    return Aws(people.admin)


def summary(job_id, status, attempt=""):
    shape = {
        "jobId": job_id,
        "jobArn": f"{ARN}:service-job/{job_id}",
        "jobName": "x",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": status,
    }
    if attempt:
        shape["latestAttempt"] = {"serviceResourceId": {"name": "TrainingJobArn", "value": attempt}}
    return shape


def described(job, aws_id, status, **extra):
    return {
        "jobId": aws_id,
        "jobArn": f"{ARN}:service-job/{aws_id}",
        "jobName": job.name if job else "adopted",
        "jobQueue": f"{ARN}:job-queue/gpu",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "status": status,
        "startedAt": 1_780_000_000_000,
        "schedulingPriority": job.scheduling_priority if job else 5,
        **extra,
    }


def test_a_new_job_is_submitted_with_its_id_as_client_token_and_its_capacity(aws, people):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws, priority=7)
    aws.expect_submit(job, "aws-1")
    aws.expect_lists({"RUNNABLE": [summary("aws-1", "RUNNABLE")]})
    # SUBMITTED to RUNNABLE changes nothing the portal shows: no DescribeServiceJob for it.
    aws.expect_snapshot([f"{ARN}:service-job/aws-1"])
    run = aws.tick()
    aws.stub.assert_no_pending_responses()

    request = submit_request(job, 7)
    assert request["clientToken"] == str(job.pk)
    assert json.loads(request["serviceRequestPayload"])["ResourceConfig"] == {
        "InstanceType": UNIT,
        "InstanceCount": 1,
    }
    assert request["quotaShareName"] == "qs1"
    remote = RemoteJob.objects.get(job=job)
    assert (remote.aws_job_id, remote.aws_status, remote.queue_position) == ("aws-1", "RUNNABLE", 1)
    assert run.backend_calls == 1 + len(AWS_ACTIVE) + 1
    assert Event.objects.filter(kind=EventKind.AWS_PUSHED, job=job).count() == 1
    job.refresh_from_db()
    # AWS decides: the job stays RUNNABLE though the portal's plan would start it now, and
    # so has no predicted reason to wait.
    assert job.status == "RUNNABLE"
    assert job.pending_reason == ""


def test_throttling_backs_off_while_other_queues_keep_ticking(aws, people):
    aws.share("qs1", "vision")
    other = Aws(people.admin, name="other", env_name="aws-other")
    add_share(people.admin, other.queue, "qs1", "vision", 1, "LEND", unit=UNIT)
    other.agree()
    job = submit(people.alice, aws)
    aws.stub.add_client_error(
        "submit_service_job", "TooManyRequestsException", "Too Many Requests", 429
    )
    now = timezone.now()
    run = aws.tick(now)
    state = SyncState.objects.get(environment=aws.env)
    assert state.failures == 1
    assert state.backoff_until > now
    assert "TooManyRequestsException" in state.last_error
    assert run.backend_calls == 1
    assert not RemoteJob.objects.filter(job=job).exists()
    assert Event.objects.filter(kind=EventKind.AWS_SYNC_FAILED, job_queue=aws.queue).count() == 1

    # Within the backoff the queue makes no call at all (the stub has none queued) ...
    assert aws.tick(now + timedelta(milliseconds=100)).backend_calls == 0
    assert SyncState.objects.get(environment=aws.env).failures == 1
    # ... while another environment's queue syncs as usual.
    other.expect_lists()
    assert other.tick(now).backend_calls == len(AWS_ACTIVE)
    assert SyncState.objects.get(environment=other.env).failures == 0


def test_backoff_grows_exponentially_with_jitter_up_to_a_cap():
    for failures, (low, high) in {1: (0.5, 1), 2: (1, 2), 3: (2, 4), 10: (30, 60)}.items():
        waits = [backoff_seconds(failures) for _ in range(50)]
        assert all(low <= w <= high for w in waits)
        assert len(set(waits)) > 1  # jittered


def test_no_credentials_in_the_chain_is_a_clear_sync_error(aws, people, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    aws.share("qs1", "vision")
    aws_client.forget_clients()  # the environment's real client, from the chain
    job = submit(people.alice, aws)
    aws.tick()
    state = SyncState.objects.get(environment=aws.env)
    assert state.last_error == "submit_service_job: Unable to locate credentials"
    assert job.status == "RUNNABLE"
    assert not RemoteJob.objects.exists()


def test_a_500_is_tried_again_after_the_backoff_and_pushes_the_job_once(aws, people):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    aws.stub.add_client_error("submit_service_job", "ServerException", "boom", 500)
    now = timezone.now()
    aws.tick(now)
    later = now + timedelta(seconds=5)
    aws.expect_submit(job, "aws-1")
    aws.expect_lists({"RUNNING": [summary("aws-1", "RUNNING", "tj-1")]})
    aws.stub.add_response(
        "describe_service_job",
        described(
            job,
            "aws-1",
            "RUNNING",
            scheduledAt=1_780_000_000_000,
            attempts=[{"serviceResourceId": {"name": "TrainingJobArn", "value": "tj-1"}}],
        ),
        {"jobId": "aws-1"},
    )
    aws.tick(later)
    aws.stub.assert_no_pending_responses()
    job.refresh_from_db()
    assert job.status == "RUNNING"
    assert job.attempts.count() == 1
    kinds = list(Event.objects.filter(job_queue=aws.queue).values_list("kind", flat=True))
    assert kinds.count(EventKind.AWS_SYNC_FAILED) == 1
    assert kinds.count(EventKind.AWS_SYNC_RECOVERED) == 1
    assert kinds.count(EventKind.DISPATCHED) == 1
    assert SyncState.objects.get(environment=aws.env).failures == 0


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket closes


def test_unreachable_then_recovered_pushes_every_job_exactly_once(aws, people, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    qs1 = aws.share("qs1", "vision")
    down = aws_client.new_client("us-west-2", f"http://127.0.0.1:{closed_port()}")
    aws_client.use_client(aws.env, down)
    jobs = [submit(people.alice, aws, name=f"j{i}") for i in range(3)]
    now = timezone.now()
    aws.tick(now)
    state = SyncState.objects.get(environment=aws.env)
    assert state.failures == 1
    assert "Could not connect" in state.last_error
    # Meanwhile: a priority is raised and a share edited; both must reach AWS later.
    services.set_priority(people.alice, jobs[0], 50)
    services.update_share(people.admin, qs1, capacity_limits={UNIT: 2})
    assert all(j.status == "RUNNABLE" for j in Job.objects.filter(job_queue=aws.queue))

    aws_client.use_client(aws.env, aws.client)
    later = now + timedelta(minutes=5)
    stub = aws.stub
    share_arn = f"{ARN}:job-queue/gpu/quota-share/qs1"
    aws.expect_config([share_detail(share_arn, limit=1, strategy="LEND_AND_BORROW")])
    stub.add_response(
        "update_quota_share",
        {"quotaShareName": "qs1", "quotaShareArn": share_arn},
        {
            "quotaShareArn": share_arn,
            "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": 2}],
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": -1},
            "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
            "state": "ENABLED",
        },
    )
    for index, job in enumerate(jobs):
        job.refresh_from_db()
        # Submitted with the priority it had when submitted; the raise follows as an update.
        stub.add_response(
            "submit_service_job",
            {"jobArn": f"{ARN}:service-job/a{index}", "jobName": job.name, "jobId": f"a{index}"},
            submit_request(job, 0),
        )
    stub.add_response("update_service_job", {}, {"jobId": "a0", "schedulingPriority": 50})
    runnable = [summary(f"a{i}", "RUNNABLE") for i in range(3)]
    aws.expect_lists({"RUNNABLE": runnable})
    aws.expect_snapshot()
    aws.tick(later)
    # The next tick pushes nothing again: only the pull.
    aws.expect_lists({"RUNNABLE": runnable})
    aws.expect_snapshot()
    aws.tick(later + timedelta(seconds=1))
    stub.assert_no_pending_responses()

    for job in jobs:
        pushed = Event.objects.filter(job=job, kind=EventKind.AWS_PUSHED, detail__what="submitted")
        assert pushed.count() == 1
    assert RemoteJob.objects.filter(job__in=jobs).count() == 3
    assert Event.objects.filter(kind=EventKind.AWS_SYNC_RECOVERED).count() == 1
    assert Job.objects.get(pk=jobs[0].pk).scheduling_priority == 50


def test_a_retried_push_repeats_the_very_same_request():
    """What makes a push safe to retry after a crash: the request depends only on what never
    changes, so AWS's clientToken check answers with the job the first push made."""

    job = Job(
        name="j",
        share_name="qs1",
        quantity=2,
        retry_attempts=2,
        evaluate_on_exit=[{"action": "RETRY", "on_status_reason": "Host*"}],
        tags={"k": "v"},
        capacity_unit=CapacityUnit(name=UNIT),
        job_queue=JobQueue(name="gpu"),
    )
    first = submit_request(job, 3)
    job.scheduling_priority = 99  # raised after submitting: sent later as UpdateServiceJob
    assert submit_request(job, 3) == first
    assert first["retryStrategy"] == {
        "attempts": 2,
        "evaluateOnExit": [{"action": "RETRY", "onStatusReason": "Host*"}],
    }


def test_a_job_aws_no_longer_knows_fails_with_that_reason(aws, people):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    RemoteJob.objects.create(job=job, aws_job_id="gone", aws_status="RUNNABLE")
    aws.expect_lists()
    aws.stub.add_client_error(
        "describe_service_job", "ClientException", "Job gone does not exist", 400
    )
    aws.tick()
    job.refresh_from_db()
    assert (job.status, job.status_reason) == ("FAILED", "AWS Batch no longer knows this job")
    assert RemoteJob.objects.get(job=job).done
    assert SyncState.objects.get(environment=aws.env).failures == 0


def test_a_job_aws_refuses_fails_with_awss_message_and_is_not_pushed_again(aws, people):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    aws.stub.add_client_error(
        "submit_service_job", "ClientException", "serviceRequestPayload is not valid", 400
    )
    aws.expect_lists()
    aws.tick()
    aws.stub.assert_no_pending_responses()
    job.refresh_from_db()
    assert job.status == "FAILED"
    assert job.status_reason == "AWS Batch refused the job: serviceRequestPayload is not valid"


def test_a_share_changed_in_the_aws_console_is_held_as_drift_then_kept(aws, people):
    qs1 = aws.share("qs1", "vision")
    MirroredResource.objects.filter(kind=MirrorKind.QUEUE).update(
        checked_at=timezone.now() - timedelta(minutes=5)
    )  # due for a drift check
    share_arn = f"{ARN}:job-queue/gpu/quota-share/qs1"
    aws_side = share_detail(share_arn, limit=3, strategy="LEND")

    aws.expect_config([aws_side])
    aws.expect_lists()
    aws.tick()  # no update_quota_share is queued: drift is held, nothing pushed
    row = MirroredResource.objects.get(kind=MirrorKind.SHARE)
    assert row.aws["capacity_limits"] == {UNIT: 3}
    assert row.aws["sharing_strategy"] == "LEND"
    drift = Event.objects.get(kind=EventKind.AWS_DRIFT)
    assert drift.share == qs1
    with pytest.raises(InvalidInput):
        resolve_drift(people.admin, qs1, "maybe")
    with pytest.raises(Forbidden):
        resolve_drift(people.alice, qs1, "keep")

    resolve_drift(people.admin, qs1, "keep")
    aws.expect_config([aws_side])
    aws.stub.add_response(
        "update_quota_share",
        {"quotaShareName": "qs1", "quotaShareArn": share_arn},
        {
            "quotaShareArn": share_arn,
            "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": 1}],
            "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW", "borrowLimit": -1},
            "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
            "state": "ENABLED",
        },
    )
    aws.expect_lists()
    aws.tick()
    aws.stub.assert_no_pending_responses()
    row.refresh_from_db()
    assert row.aws is None
    assert row.synced == share_config(qs1)
    assert Event.objects.filter(kind=EventKind.AWS_DRIFT_RESOLVED).count() == 1


def test_a_tick_makes_no_more_calls_than_its_budget(aws, people, settings):
    settings.QP_AWS_MAX_CALLS_PER_TICK = 3
    aws.share("qs1", "vision")
    jobs = [submit(people.alice, aws, name=f"j{i}") for i in range(5)]
    for index, job in enumerate(jobs[:3]):
        aws.expect_submit(job, f"b{index}")
    run = aws.tick()
    assert run.backend_calls == 3
    assert RemoteJob.objects.count() == 3
    assert SyncState.objects.get(environment=aws.env).failures == 0  # not a failure
    for index, job in enumerate(jobs[3:], start=3):
        aws.expect_submit(job, f"b{index}")
    aws.stub.add_response("list_service_jobs", {"jobSummaryList": []}, None)
    aws.tick()
    aws.stub.assert_no_pending_responses()
    assert RemoteJob.objects.count() == 5


def test_a_job_submitted_straight_to_aws_is_adopted_and_its_run_recorded(aws, people):
    aws.share("qs1", "vision")
    aws.expect_lists({"RUNNING": [summary("direct", "RUNNING")]})
    aws.stub.add_response(
        "describe_service_job",
        described(
            None,
            "direct",
            "RUNNING",
            quotaShareName="qs1",
            capacityUsage=[{"capacityUnit": UNIT, "quantity": 1}],
            createdAt=1_780_000_000_000,
        ),
        {"jobId": "direct"},
    )
    aws.tick()
    job = Job.objects.get(remote__aws_job_id="direct")
    assert (job.status, job.share_name, job.scheduling_priority) == ("RUNNING", "qs1", 5)
    assert Event.objects.filter(job=job, kind=EventKind.AWS_IMPORTED).exists()


def test_preemptions_and_the_end_reported_by_aws_reach_the_job_and_audit_log(aws, people):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    RemoteJob.objects.create(job=job, aws_job_id="p1", aws_status="RUNNABLE")
    attempt = {"serviceResourceId": {"name": "TrainingJobArn", "value": "tj-1"}}
    aws.expect_lists({"RUNNING": [summary("p1", "RUNNING", "tj-1")]})
    aws.stub.add_response(
        "describe_service_job", described(job, "p1", "RUNNING", attempts=[attempt]), None
    )
    aws.tick()
    preempted = {
        "preemptedAttemptCount": 1,
        "recentPreemptedAttempts": [
            {
                "serviceResourceId": attempt["serviceResourceId"],
                "startedAt": 1_780_000_000_000,
                "stoppedAt": 1_780_000_060_000,
                "statusReason": "PREEMPTION_IN_PROGRESS: In-share preemption triggered",
            }
        ],
    }
    second = {"serviceResourceId": {"name": "TrainingJobArn", "value": "tj-2"}}
    # Preempted and dispatched again between two pulls: same status, a new latest attempt.
    aws.expect_lists({"RUNNING": [summary("p1", "RUNNING", "tj-2")]})
    aws.stub.add_response(
        "describe_service_job",
        described(job, "p1", "RUNNING", attempts=[attempt, second], preemptionSummary=preempted),
        None,
    )
    aws.tick()
    aws.expect_lists()  # gone from the active lists: it ended
    aws.stub.add_response(
        "describe_service_job",
        described(
            job,
            "p1",
            "SUCCEEDED",
            attempts=[attempt, second],
            preemptionSummary=preempted,
            stoppedAt=1_780_000_900_000,
            statusReason="Received status from SageMaker: Training job completed",
        ),
        None,
    )
    aws.tick()
    aws.stub.assert_no_pending_responses()
    job.refresh_from_db()
    assert (job.status, job.preempted_count) == ("SUCCEEDED", 1)
    assert job.attempts.count() == 2
    kinds = list(Event.objects.filter(job=job).order_by("id").values_list("kind", flat=True))
    assert kinds[-6:] == [
        EventKind.DISPATCHED,
        EventKind.STARTED,
        EventKind.PREEMPTED_IN_SHARE,  # seen after the fact: it has stopped (detail.stopped)
        EventKind.DISPATCHED,
        EventKind.STARTED,
        EventKind.SUCCEEDED,
    ]
    assert RemoteJob.objects.get(job=job).done


def test_a_sync_starts_no_call_past_its_time_limit(aws, people, settings):
    """A slow AWS must not hold the environment's lock: with the time spent, the sync stops
    as if its budget were spent (not a failure), and the next tick goes on."""
    settings.QP_AWS_SYNC_SECONDS = 0
    aws.share("qs1", "vision")
    submit(people.alice, aws)
    run = aws.tick()  # the stub has nothing queued: any call would be a failure
    assert run.backend_calls == 0
    assert SyncState.objects.get(environment=aws.env).failures == 0
    assert not RemoteJob.objects.exists()


def test_a_priority_changed_in_aws_is_pulled_though_the_status_stays(aws, people):
    """ListServiceJobs carries no priority: a waiting job not looked at for a while is
    described, and AWS's new priority reaches the portal (issue 34, item 2)."""
    aws.share("qs1", "vision")
    job = submit(people.alice, aws, priority=3)
    aws.expect_submit(job, "aws-1")
    aws.expect_lists({"RUNNABLE": [summary("aws-1", "RUNNABLE")]})
    aws.expect_snapshot()
    aws.tick()
    aws.stub.assert_no_pending_responses()
    # Someone raises it in the AWS console; a minute later the status is still RUNNABLE.
    RemoteJob.objects.filter(job=job).update(pushed_at=timezone.now() - timedelta(minutes=2))
    aws.expect_lists({"RUNNABLE": [summary("aws-1", "RUNNABLE")]})
    aws.stub.add_response(
        "describe_service_job",
        described(job, "aws-1", "RUNNABLE", schedulingPriority=9),
        {"jobId": "aws-1"},
    )
    aws.expect_snapshot()
    aws.tick()
    aws.stub.assert_no_pending_responses()
    job.refresh_from_db()
    assert job.scheduling_priority == 9
    assert Event.objects.filter(job=job, kind=EventKind.PRIORITY_CHANGED).exists()
    # Looked at just now: the next sync lists it and describes nothing.
    aws.expect_lists({"RUNNABLE": [summary("aws-1", "RUNNABLE")]})
    aws.expect_snapshot()
    aws.tick()
    aws.stub.assert_no_pending_responses()


def test_a_job_terminated_in_aws_while_waiting_never_started(aws, people):
    """AWS fills the required startedAt with 0 for a job that never ran: no 1970 start."""
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    RemoteJob.objects.create(job=job, aws_job_id="w1", aws_status="RUNNABLE", queue_position=1)
    aws.expect_lists()  # gone from the active lists: it ended
    aws.stub.add_response(
        "describe_service_job",
        described(
            job,
            "w1",
            "FAILED",
            startedAt=0,
            stoppedAt=1_780_000_060_000,
            isTerminated=True,
            statusReason="Terminated by the AWS console",
        ),
        None,
    )
    aws.tick()
    job.refresh_from_db()
    assert (job.status, job.started_at) == ("FAILED", None)
    assert job.stopped_at is not None
    assert job.stopped_at.year > 2000
    assert not job.attempts.exists()


def test_an_ended_job_keeps_no_place_in_the_line(aws, people, client):
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    RemoteJob.objects.create(
        job=job, aws_job_id="d1", aws_status="RUNNABLE", queue_position=1, share_head=True
    )
    aws.expect_lists()
    aws.stub.add_response(
        "describe_service_job",
        described(job, "d1", "SUCCEEDED", stoppedAt=1_780_000_900_000, statusReason="done"),
        None,
    )
    aws.tick()
    remote = RemoteJob.objects.get(job=job)
    assert (remote.queue_position, remote.share_head) == (None, False)
    client.force_login(people.alice)
    shown = client.get(f"/api/v1/jobs/{job.pk}/").json()["aws"]
    assert (shown["queue_position"], shown["heads_its_share"]) == (None, False)


def test_a_job_terminated_in_the_portal_takes_awss_stop_time(aws, people):
    """Terminated here at T, the job ran on in AWS until AWS stopped it at T + 40 s: its
    stop, and its attempt's, are AWS's (the usage counts what really ran)."""
    aws.share("qs1", "vision")
    job = submit(people.alice, aws)
    RemoteJob.objects.create(job=job, aws_job_id="t1", aws_status="RUNNABLE")
    attempt = {
        "serviceResourceId": {"name": "TrainingJobArn", "value": "a"},
        "startedAt": 1_780_000_000_000,
    }
    aws.expect_lists({"RUNNING": [summary("t1", "RUNNING", "a")]})
    aws.stub.add_response(
        "describe_service_job", described(job, "t1", "RUNNING", attempts=[attempt]), None
    )
    aws.tick()
    services.terminate_job(people.alice, Job.objects.get(pk=job.pk), "not needed")
    aws.stub.add_response("terminate_service_job", {}, {"jobId": "t1", "reason": "not needed"})
    aws.expect_lists()
    stopped = 1_780_000_040_000
    aws.stub.add_response(
        "describe_service_job",
        described(
            job,
            "t1",
            "FAILED",
            attempts=[{**attempt, "stoppedAt": stopped, "statusReason": "not needed"}],
            stoppedAt=stopped,
            isTerminated=True,
            statusReason="not needed",
        ),
        None,
    )
    aws.tick()
    aws.stub.assert_no_pending_responses()
    job.refresh_from_db()
    from quotaportal.awsbatch.sync.comparable import moment

    assert job.status == "FAILED"
    assert job.stopped_at == moment(stopped)
    assert job.attempts.get().stopped_at == moment(stopped)
