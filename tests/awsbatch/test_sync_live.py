"""The AWS_BATCH backend against a second live quotaportal playing AWS (its /aws/batch/
endpoint, its own database, its own Celery ticks): AWS's quota-management walkthrough driven
from this portal's REST API reaches the outcomes the same walkthrough reaches on SIMULATED,
with statuses, preemption summaries and queue positions flowing back; drift; an import."""

from __future__ import annotations

import io
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from quotaportal.awsbatch.models import MirroredResource, RemoteJob
from quotaportal.awsbatch.sync.comparable import submit_request
from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, Job, JobQueue, JobStatus, QuotaShare
from quotaportal.quotas.services.shares import limits_of
from quotaportal.tick.run import run_tick
from tests.awsbatch.builders import add_share, payload, setup_queue

pytestmark = pytest.mark.slow
UNIT = "ml.g5.xlarge"


@pytest.fixture
def rest(db):
    admin, admin_token = services.create_user("ada", admin=True)
    sam, sam_token = services.create_user("sam", teams=["qs1", "qs2", "qs3"])

    def client(token):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return api

    return client(admin_token), client(sam_token)


def ok(response, status=(200, 201)):
    assert response.status_code in (status if isinstance(status, tuple) else (status,)), (
        response.status_code,
        response.content[:2000],
    )
    return response.json()


def build_walkthrough_queue(admin, queue: str, env: dict) -> JobQueue:
    """AWS's walkthrough through the REST API: 3 instances; QS1 LEND_AND_BORROW 200 % with
    in-share preemption, QS2 LEND, QS3 RESERVE, one instance each."""
    if admin.get(f"/api/v1/capacity-units/{UNIT}/").status_code != 200:
        ok(admin.post("/api/v1/capacity-units/", {"name": UNIT}, format="json"))
    ok(
        admin.post(
            "/api/v1/service-environments/",
            {**env, "capacity_limits": [{"capacity_unit": UNIT, "max_capacity": 3}]},
            format="json",
        )
    )
    ok(admin.post("/api/v1/scheduling-policies/", {"name": f"{queue}-fifo"}, format="json"))
    ok(
        admin.post(
            "/api/v1/job-queues/",
            {
                "name": queue,
                "scheduling_policy": f"{queue}-fifo",
                "service_environment": env["name"],
            },
            format="json",
        )
    )
    for name, strategy, extra in (
        ("QS1", "LEND_AND_BORROW", {"borrow_limit": 200, "in_share_preemption": True}),
        ("QS2", "LEND", {}),
        ("QS3", "RESERVE", {}),
    ):
        ok(
            admin.post(
                "/api/v1/quota-shares/",
                {
                    "job_queue": queue,
                    "name": name,
                    "team": name.lower(),
                    "capacity_limits": [{"capacity_unit": UNIT, "max_capacity": 1}],
                    "sharing_strategy": strategy,
                    **extra,
                },
                format="json",
            )
        )
    return JobQueue.objects.get(name=queue)


def aws_env(name: str, standin) -> dict:
    """An AWS_BATCH environment whose AWS is the stand-in (credentials from the environment)."""
    return {
        "name": name,
        "backend": "AWS_BATCH",
        "region": "us-west-2",
        "endpoint_url": standin.endpoint,
    }


def aws_import(standin, queue: str, out) -> None:
    """`manage.py aws_import` of the stand-in's queue."""
    call_command(
        "aws_import", "--region", "us-west-2", "--endpoint-url", standin.endpoint, queue, stdout=out
    )


def submit(scientist, queue: str, name: str, share: str, priority: int) -> str:
    body = {
        "job_queue": queue,
        "quota_share": share,
        "capacity_unit": UNIT,
        "name": name,
        "scheduling_priority": priority,
    }
    return ok(scientist.post("/api/v1/jobs/", body, format="json"))["id"]


def states(queue: JobQueue) -> dict[str, tuple[str, int]]:
    return {
        job.name: (job.status, job.preempted_count)
        for job in Job.objects.filter(job_queue=queue).order_by("name")
    }


def tick_until(queue: JobQueue, wanted: dict, timeout: float = 40.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        run_tick(queue.pk)
        got = {name: states(queue).get(name) for name in wanted}
        if got == wanted:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:.0f} s for {wanted}, have {got}")
        time.sleep(0.3)


def walkthrough(admin, scientist, queue: JobQueue) -> list[dict]:
    """The three steps of AWS's notebook; the states after each."""
    ids = {
        name: submit(scientist, queue.name, name, "QS1", priority)
        for name, priority in (("qs1_high", 3), ("qs1_med", 2), ("qs1_low", 1))
    }
    after = []
    first = {"qs1_high": ("RUNNING", 0), "qs1_med": ("RUNNING", 0), "qs1_low": ("RUNNABLE", 0)}
    tick_until(queue, first)
    after.append(states(queue))
    ids["qs2_job"] = submit(scientist, queue.name, "qs2_job", "QS2", 1)
    second = {**first, "qs1_med": ("RUNNABLE", 1), "qs2_job": ("RUNNING", 0)}
    tick_until(queue, second)
    after.append(states(queue))
    patched = scientist.patch(
        f"/api/v1/jobs/{ids['qs1_low']}/", {"scheduling_priority": 4}, format="json"
    )
    ok(patched)
    third = {**second, "qs1_low": ("RUNNING", 0), "qs1_high": ("RUNNABLE", 1)}
    tick_until(queue, third)
    after.append(states(queue))
    return after


def test_aws_walkthrough_on_aws_batch_reaches_the_simulated_outcomes(rest, aws_credentials):
    admin, scientist = rest
    simulated = build_walkthrough_queue(
        admin, "sim-queue", {"name": "sim-env", "backend": "SIMULATED"}
    )
    on_aws = build_walkthrough_queue(admin, "gpu-queue", aws_env("aws-env", aws_credentials))

    assert walkthrough(admin, scientist, on_aws) == walkthrough(admin, scientist, simulated)

    # AWS's side holds the same jobs (pushed exactly once each) and agrees on every state.
    aws = aws_credentials.client()
    listed = {}
    for status in ("RUNNABLE", "RUNNING"):
        for page in aws.get_paginator("list_service_jobs").paginate(
            jobQueue="gpu-queue", jobStatus=status
        ):
            listed.update({s["jobName"]: s["status"] for s in page["jobSummaryList"]})
    assert listed == {name: status for name, (status, _) in states(on_aws).items()}
    assert RemoteJob.objects.filter(job__job_queue=on_aws).count() == 4

    # Preemption summaries flowed back: the kinds AWS reported, in the portal's audit log.
    med = Job.objects.get(job_queue=on_aws, name="qs1_med")
    high = Job.objects.get(job_queue=on_aws, name="qs1_high")
    assert "Cross-share" in med.recent_preemptions[-1]["status_reason"]
    assert "In-share" in high.recent_preemptions[-1]["status_reason"]
    kinds = set(Event.objects.filter(job_queue=on_aws).values_list("kind", flat=True))
    assert {EventKind.PREEMPTED_CROSS_SHARE, EventKind.PREEMPTED_IN_SHARE} <= kinds
    assert high.attempts.count() >= 1

    # Positions from GetJobQueueSnapshot; the pending reason is the portal's prediction.
    run_tick(on_aws.pk)
    waiting = RemoteJob.objects.filter(job__job_queue=on_aws, job__status="RUNNABLE")
    assert sorted(r.queue_position for r in waiting) == [1, 2]
    assert any(r.share_head for r in waiting)
    shown = ok(admin.get(f"/api/v1/jobs/{med.pk}/"))
    assert shown["aws"]["job_id"] == med.remote.aws_job_id
    assert shown["aws"]["pending_reason_is_predicted"] is True
    assert shown["pending_reason"]

    # Every tick's AWS calls are bounded and recorded on its run.
    runs = on_aws.scheduler_runs.all()
    assert max(r.backend_calls for r in runs) <= 60
    assert sum(r.backend_calls for r in runs) > 0
    assert on_aws.service_environment.aws_sync.failures == 0

    # Terminate from the portal: AWS stops it too.
    ok(
        scientist.post(
            f"/api/v1/jobs/{high.pk}/terminate/", {"reason": "not needed"}, format="json"
        )
    )
    run_tick(on_aws.pk)
    described = aws.describe_service_job(jobId=high.remote.aws_job_id)
    assert described["status"] == "FAILED"


def test_a_share_changed_in_aws_is_drift_until_an_admin_decides(rest, aws_credentials):
    admin, _ = rest
    queue = build_walkthrough_queue(
        admin,
        "drift-queue",
        aws_env("drift-env", aws_credentials),
    )
    run_tick(queue.pk)  # mirrors the queue and its shares into AWS
    aws = aws_credentials.client()
    share_arn = MirroredResource.objects.get(name="drift-queue/QS2").arn
    aws.update_quota_share(
        quotaShareArn=share_arn, capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 2}]
    )
    MirroredResource.objects.filter(name="drift-queue").update(checked_at=None)  # look now
    run_tick(queue.pk)
    row = MirroredResource.objects.get(name="drift-queue/QS2")
    assert row.aws["capacity_limits"] == {UNIT: 2}
    assert Event.objects.filter(kind=EventKind.AWS_DRIFT).exists()
    share = QuotaShare.objects.get(job_queue=queue, name="QS2")

    browser = Client()
    browser.force_login(get_user_model().objects.get(username="ada"))
    page = browser.get(f"/shares/{share.pk}/edit/")
    assert b"changed in AWS" in page.content
    done = browser.post(f"/shares/{share.pk}/drift/", {"decision": "adopt"})
    assert done.status_code == 302
    share.refresh_from_db()
    assert limits_of(share) == {UNIT: 2}
    row.refresh_from_db()
    assert row.aws is None
    assert Event.objects.filter(kind=EventKind.AWS_DRIFT_RESOLVED).exists()


def test_aws_import_adopts_an_existing_queue_without_recreating_it(db, aws_credentials):
    aws = aws_credentials.client()
    setup_queue(aws, queue="imported")
    add_share(aws, "team-a", queue="imported", tags={"quotaportal:team": "team-a"})
    add_share(aws, "team-b", strategy="LEND", queue="imported")
    aws.submit_service_job(
        jobName="existing",
        jobQueue="imported",
        serviceJobType="SAGEMAKER_TRAINING",
        quotaShareName="team-a",
        serviceRequestPayload=payload(),
        schedulingPriority=7,
    )
    out = io.StringIO()
    aws_import(aws_credentials, "imported", out)
    queue = JobQueue.objects.get(name="imported")
    assert queue.service_environment.backend == "AWS_BATCH"
    assert set(queue.quota_shares.values_list("name", flat=True)) == {"team-a", "team-b"}
    job = Job.objects.get(job_queue=queue, name="existing")
    assert job.scheduling_priority == 7
    assert job.remote.aws_job_id
    assert "imported job queue imported" in out.getvalue()

    check = io.StringIO()
    call_command("aws_sync_check", queue.service_environment.name, stdout=check)
    assert "nothing to push" in check.getvalue()

    run_tick(queue.pk)
    assert not Event.objects.filter(kind=EventKind.AWS_PUSHED).exists()
    assert len(aws.list_quota_shares(jobQueue="imported")["quotaShares"]) == 2


def test_a_push_repeated_after_a_crash_makes_no_second_job(rest, aws_credentials):
    """The worker pushed a job, then died (kill -9) before its transaction committed: the
    portal does not know the push happened. The next tick pushes again; AWS answers with the
    first job, and a priority raised meanwhile follows as an update."""
    admin, scientist = rest
    env = aws_env("crash-env", aws_credentials)
    queue = build_walkthrough_queue(admin, "crash-queue", env)
    run_tick(queue.pk)  # the queue and shares exist in AWS
    job = Job.objects.get(pk=submit(scientist, "crash-queue", "once", "QS3", 2))
    aws = aws_credentials.client()
    first = aws.submit_service_job(**submit_request(job, 2))  # the push that was lost
    ok(scientist.patch(f"/api/v1/jobs/{job.pk}/", {"scheduling_priority": 5}, format="json"))

    run_tick(queue.pk)
    job.refresh_from_db()
    assert job.remote.aws_job_id == first["jobId"]
    # Every status: the stand-in moves its job on by itself (RUNNABLE, SCHEDULED, RUNNING,
    # ...), and a listing of two statuses missed it while it was SCHEDULED; by id, since a
    # job that moves on between two listings is in both.
    names = {
        summary["jobId"]: summary["jobName"]
        for status in JobStatus.values
        for summary in aws.list_service_jobs(jobQueue="crash-queue", jobStatus=status)[
            "jobSummaryList"
        ]
    }
    assert names == {first["jobId"]: "once"}
    assert aws.describe_service_job(jobId=first["jobId"])["schedulingPriority"] == 5


def test_aws_import_refuses_an_environment_of_the_same_name_elsewhere(db, aws_credentials):
    """A portal environment named like the imported queue's, but syncing with another
    endpoint: attaching the queue there would push it to the wrong AWS at the next sync."""
    from django.core.management.base import CommandError

    from quotaportal.quotas.models import ServiceEnvironment

    aws = aws_credentials.client()
    setup_queue(aws, queue="elsewhere")
    admin = get_user_model().objects.get_or_create(username="ops", is_staff=True)[0]
    services.create_capacity_unit(admin, name=UNIT)
    services.create_service_environment(
        admin,
        name="elsewhere-env",
        backend="AWS_BATCH",
        capacity_limits={UNIT: 1},
        region="us-west-2",
        endpoint_url="http://127.0.0.1:9",
    )
    with pytest.raises(CommandError, match="syncs with region us-west-2 at http://127.0.0.1:9"):
        aws_import(aws_credentials, "elsewhere", io.StringIO())
    assert not JobQueue.objects.filter(name="elsewhere").exists()
    assert ServiceEnvironment.objects.get(name="elsewhere-env").endpoint_url == "http://127.0.0.1:9"
