"""AWS's quota-management walkthrough through the real SageMaker SDK v3 (TrainingQueue,
TrainingQueuedJob.describe/update/terminate, list_jobs_by_share) against a live server."""

from __future__ import annotations

import importlib.util

from quotaportal.quotas.models import (
    Event,
    Job,
    JobQueue,
    QuotaShare,
    SchedulingPolicy,
    ServiceEnvironment,
)
from quotaportal.tick.run import run_tick
from tests.builders import REPO


def load_walkthrough():
    spec = importlib.util.spec_from_file_location(
        "aws_walkthrough", REPO / "scripts" / "aws_walkthrough.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sdk_reaches_aws_documented_outcomes(aws, admin, monkeypatch):
    walkthrough = load_walkthrough()
    for name in (*walkthrough.SDK_SETTINGS, "AWS_ENDPOINT_URL_BATCH", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)  # configure_sdk sets them; restore afterwards
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "unset")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unset")
    queue_name = walkthrough.create_shares(admin, "test", team="qs1")
    walkthrough.configure_sdk(aws.endpoint, *aws.keys["sam"])  # a member of team qs1
    queue = JobQueue.objects.get(name=queue_name)
    lines = []

    failures = walkthrough.Walkthrough(
        queue_name, settle=lambda: run_tick(queue.pk), timeout=10, out=lines.append
    ).run()

    assert failures == [], lines
    assert sum(line.startswith("[ok]") for line in lines) == 3
    assert "QS1 jobs RUNNING (list_jobs_by_share): ['qs1-low']" in lines
    high = Job.objects.get(name="qs1-high")
    assert high.preempted_count == 1
    assert "'preemptedAttemptCount': 1" in next(line for line in lines if "qs1-high pre" in line)
    assert Event.objects.filter(kind="priority_changed", actor__username="sam").exists()
    assert set(Job.objects.values_list("status", flat=True)) == {"FAILED"}  # all terminated
    sdk_payload = Job.objects.get(name="qs2-job").service_request_payload
    assert sdk_payload["ResourceConfig"]["InstanceType"] == "ml.g5.xlarge"
    # Afterwards its shares are gone and its queue and environment DISABLED; a second run
    # uses them again rather than leaving another set behind.
    walkthrough.remove_shares(admin, queue_name)
    assert not QuotaShare.objects.filter(job_queue__name=queue_name).exists()
    assert JobQueue.objects.get(name=queue_name).state == "DISABLED"
    assert ServiceEnvironment.objects.get(name=queue_name).state == "DISABLED"
    assert walkthrough.create_shares(admin, "test", team="qs1") == queue_name
    assert JobQueue.objects.get(name=queue_name).state == "ENABLED"
    assert QuotaShare.objects.filter(job_queue__name=queue_name).count() == 3
    assert (JobQueue.objects.count(), SchedulingPolicy.objects.count()) == (1, 1)
