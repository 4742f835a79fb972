"""The AWS-compatible endpoint refuses what AWS refuses before it reaches the database, with a
ClientException that says what to fix (boto3 retries a 5xx, so a 500 here is retried in vain):
names as AWS validates them, nesting too deep, a body over the limit."""

from __future__ import annotations

import json

import pytest

from quotaportal.quotas.models import Job, JobQueue, SchedulingPolicy, ServiceEnvironment
from tests.awsbatch.builders import add_share, payload, setup_queue, signed_post

NAMES = {
    "129 characters": "a" * 129,
    "a space": "my queue",
    "a slash": "a/quota-share/bX",
    "an exclamation mark": "go!",
}


def submit_body(**changes) -> bytes:
    body = {
        "jobName": "j",
        "jobQueue": "jq",
        "serviceJobType": "SAGEMAKER_TRAINING",
        "quotaShareName": "qs1",
        "serviceRequestPayload": payload(),
        **changes,
    }
    return json.dumps(body).encode()


def refused(answer, message: str) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.headers["x-amzn-ErrorType"] == "ClientException"
    assert message in answer.json()["message"]


@pytest.mark.parametrize("name", list(NAMES.values()), ids=list(NAMES))
def test_names_aws_refuses_are_refused(aws, name):
    bodies = {
        "createschedulingpolicy": {"name": name},
        "createserviceenvironment": {
            "serviceEnvironmentName": name,
            "serviceEnvironmentType": "SAGEMAKER_TRAINING",
            "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1}],
        },
        "createjobqueue": {
            "jobQueueName": name,
            "priority": 1,
            "schedulingPolicyArn": "p",
            "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "e"}],
            "jobQueueType": "SAGEMAKER_TRAINING",
        },
    }
    for operation, body in bodies.items():
        answer = signed_post(aws, "ada", operation, json.dumps(body).encode())
        refused(answer, "must be 1 to 128 letters, numbers, - and _")
    assert not SchedulingPolicy.objects.exists()
    assert not ServiceEnvironment.objects.exists()
    assert not JobQueue.objects.exists()


def test_share_and_job_names_are_checked_too(aws, admin):
    setup_queue(admin)
    add_share(admin, "qs1")
    share = {
        "quotaShareName": "b" * 129,
        "jobQueue": "jq",
        "capacityLimits": [{"capacityUnit": "ml.g5.xlarge", "maxCapacity": 1}],
        "resourceSharingConfiguration": {"strategy": "LEND"},
        "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
    }
    refused(signed_post(aws, "ada", "createquotashare", json.dumps(share).encode()), "128")
    refused(signed_post(aws, "sam", "submitservicejob", submit_body(jobName="no way")), "jobName")
    assert not Job.objects.exists()


def test_a_capacity_unit_over_64_characters_is_refused(aws):
    body = {
        "serviceEnvironmentName": "env",
        "serviceEnvironmentType": "SAGEMAKER_TRAINING",
        "capacityLimits": [{"capacityUnit": "u" * 65, "maxCapacity": 1}],
    }
    answer = signed_post(aws, "ada", "createserviceenvironment", json.dumps(body).encode())
    refused(answer, "capacityUnit must be 1 to 64 letters")


@pytest.mark.parametrize("depth", [33, 10_000])
def test_nesting_too_deep_is_a_client_exception(aws, admin, depth):
    setup_queue(admin)
    add_share(admin, "qs1")
    nested = "[" * depth + "]" * depth
    body = b'{"jobName": "j", "x": ' + nested.encode() + b"}"
    refused(signed_post(aws, "sam", "submitservicejob", body), "more than 32 deep")
    inner = submit_body(serviceRequestPayload='{"a": ' + nested + "}")
    refused(signed_post(aws, "sam", "submitservicejob", inner), "more than 32 deep")
    assert not Job.objects.exists()


def test_a_signed_body_over_the_limit_is_a_413_client_exception(aws, settings):
    body = json.dumps({"name": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)}).encode()
    answer = signed_post(aws, "ada", "createschedulingpolicy", body)
    assert answer.status_code == 413
    assert answer.headers["x-amzn-ErrorType"] == "ClientException"
    assert "at most" in answer.json()["message"]
