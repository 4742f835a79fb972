"""boto3, unchanged, against a live server: every operation, pagination, tags, the errors AWS
clients expect, and SigV4 checks."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from django.utils import timezone

from quotaportal.quotas.models import Event, Job
from tests.awsbatch.builders import UNIT, add_share, batch_client, payload, setup_queue, signed_post


def submit(client, name, share="qs1", queue="jq", **extra):
    extra.setdefault("serviceRequestPayload", payload())
    return client.submit_service_job(
        jobName=name,
        jobQueue=queue,
        serviceJobType="SAGEMAKER_TRAINING",
        quotaShareName=share,
        **extra,
    )


def error_of(call, *args, **kwargs) -> tuple[int, str, str]:
    with pytest.raises(ClientError) as caught:
        call(*args, **kwargs)
    response = caught.value.response
    return (
        response["ResponseMetadata"]["HTTPStatusCode"],
        response["Error"]["Code"],
        response["Error"]["Message"],
    )


def test_admin_defines_policy_environment_queue_and_shares_then_changes_and_deletes_them(admin):
    policy, env = setup_queue(admin, capacity=4)
    assert policy["arn"].endswith(":scheduling-policy/jq-policy")
    assert admin.describe_scheduling_policies(arns=[policy["arn"]])["schedulingPolicies"][0][
        "quotaSharePolicy"
    ] == {"idleResourceAssignmentStrategy": "FIFO"}
    assert [p["arn"] for p in admin.list_scheduling_policies()["schedulingPolicies"]] == [
        policy["arn"]
    ]
    admin.update_scheduling_policy(
        arn=policy["arn"], quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}
    )

    admin.update_service_environment(
        serviceEnvironment="jq-env", capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 6}]
    )
    described = admin.describe_service_environments(serviceEnvironments=["jq-env"])
    (detail,) = described["serviceEnvironments"]
    assert detail["capacityLimits"] == [{"capacityUnit": UNIT, "maxCapacity": 6}]
    assert (detail["serviceEnvironmentType"], detail["state"]) == ("SAGEMAKER_TRAINING", "ENABLED")

    admin.update_job_queue(jobQueue="jq", priority=20)
    (queue,) = admin.describe_job_queues(jobQueues=["jq"])["jobQueues"]
    assert (queue["priority"], queue["schedulingPolicyArn"]) == (20, policy["arn"])
    assert queue["serviceEnvironmentOrder"][0]["serviceEnvironment"] == env["serviceEnvironmentArn"]

    arn = add_share(admin, "qs1", limit=2, in_share="ENABLED", tags={"cost-center": "42"})
    assert arn.endswith(":job-queue/jq/quota-share/qs1")
    admin.update_quota_share(
        quotaShareArn=arn,
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 3}],
        resourceSharingConfiguration={"strategy": "LEND"},
        state="DISABLED",
    )
    share = admin.describe_quota_share(quotaShareArn=arn)
    assert share["capacityLimits"] == [{"capacityUnit": UNIT, "maxCapacity": 3}]
    assert share["resourceSharingConfiguration"] == {"strategy": "LEND", "borrowLimit": -1}
    assert (share["state"], share["tags"]) == ("DISABLED", {"cost-center": "42"})
    assert share["preemptionConfiguration"] == {"inSharePreemption": "ENABLED"}
    listed = admin.list_quota_shares(jobQueue="jq")["quotaShares"]
    assert [s["quotaShareArn"] for s in listed] == [arn]

    admin.delete_quota_share(quotaShareArn=arn)
    assert admin.list_quota_shares(jobQueue="jq")["quotaShares"] == []
    # The same audit log as the web pages and REST API.
    assert Event.objects.filter(actor__username="ada", kind="share_deleted").exists()
    admin.update_job_queue(jobQueue="jq", state="DISABLED")
    admin.delete_job_queue(jobQueue="jq")
    admin.update_service_environment(serviceEnvironment="jq-env", state="DISABLED")
    admin.delete_service_environment(serviceEnvironment=env["serviceEnvironmentArn"])
    admin.delete_scheduling_policy(arn=policy["arn"])
    assert admin.describe_job_queues()["jobQueues"] == []
    assert admin.describe_service_environments()["serviceEnvironments"] == []
    assert admin.list_scheduling_policies()["schedulingPolicies"] == []


def test_service_jobs_submit_run_change_priority_describe_and_terminate(aws, admin, scientist):
    setup_queue(admin)
    add_share(admin, "qs1")
    job = submit(
        scientist,
        "train-1",
        schedulingPriority=5,
        retryStrategy={
            "attempts": 3,
            "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "Bad*"}],
        },
        preemptionConfiguration={"preemptionRetriesBeforeTermination": 2},
        timeoutConfig={"attemptDurationSeconds": 7200},
        tags={"project": "x"},
        serviceRequestPayload=payload(count=2),
    )
    assert job["jobArn"] == f"arn:aws:batch:us-east-1:000000000000:service-job/{job['jobId']}"
    waiting = scientist.describe_service_job(jobId=job["jobId"])
    assert waiting["status"] == "RUNNABLE"
    assert waiting["startedAt"] == 0  # required by the model: present, and not a start
    aws.tick("jq")
    aws.tick("jq")
    running = scientist.describe_service_job(jobId=job["jobArn"])  # an ARN works too
    assert running["status"] == "RUNNING"
    assert running["capacityUsage"] == [{"capacityUnit": UNIT, "quantity": 2}]
    assert running["retryStrategy"] == {
        "attempts": 3,
        "evaluateOnExit": [{"action": "EXIT", "onStatusReason": "Bad*"}],
    }
    assert running["preemptionConfiguration"] == {"preemptionRetriesBeforeTermination": 2}
    assert running["timeoutConfig"] == {"attemptDurationSeconds": 7200}
    assert json.loads(running["serviceRequestPayload"])["ResourceConfig"]["InstanceCount"] == 2
    (attempt,) = running["attempts"]
    assert attempt["serviceResourceId"]["name"] == "TrainingJobArn"
    assert running["latestAttempt"]["serviceResourceId"] == attempt["serviceResourceId"]
    assert running["startedAt"] >= running["scheduledAt"] >= running["createdAt"]

    updated = scientist.update_service_job(jobId=job["jobArn"], schedulingPriority=9000)
    assert updated["jobId"] == job["jobId"]
    assert scientist.describe_service_job(jobId=job["jobId"])["schedulingPriority"] == 9000

    scientist.terminate_service_job(jobId=job["jobArn"], reason="not needed")
    ended = scientist.describe_service_job(jobId=job["jobId"])
    assert (ended["status"], ended["statusReason"], ended["isTerminated"]) == (
        "FAILED",
        "not needed",
        True,
    )
    assert "stoppedAt" in ended


def test_simulated_jobs_run_for_their_max_runtime_unless_a_tag_says_otherwise(
    aws, admin, scientist
):
    setup_queue(admin)
    add_share(admin, "qs1", limit=3)
    stopping = {"StoppingCondition": {"MaxRuntimeInSeconds": 600}}
    by_runtime = submit(scientist, "by-runtime", serviceRequestPayload=payload(**stopping))
    by_tag = submit(
        scientist,
        "by-tag",
        serviceRequestPayload=payload(**stopping),
        tags={"quotaportal:simulated-seconds": "5"},
    )
    assert Job.objects.get(pk=by_runtime["jobId"]).simulated_duration_seconds == 600
    now = timezone.now()
    aws.tick("jq", now)
    aws.tick("jq", now + timedelta(seconds=1))
    aws.tick("jq", now + timedelta(seconds=10))
    statuses = {
        name: scientist.describe_service_job(jobId=j["jobId"])["status"]
        for name, j in (("runtime", by_runtime), ("tag", by_tag))
    }
    assert statuses == {"runtime": "RUNNING", "tag": "SUCCEEDED"}


def test_local_jobs_take_their_command_from_the_payload_environment(admin, scientist):
    setup_queue(admin, backend_tags={"quotaportal:backend": "LOCAL"})
    add_share(admin, "qs1")
    status, code, message = error_of(submit, scientist, "no-command")
    assert (status, code) == (400, "ClientException")
    assert 'Environment["QP_COMMAND"]' in message
    job = submit(
        scientist,
        "with-command",
        serviceRequestPayload=payload(Environment={"QP_COMMAND": "python train.py"}),
    )
    stored = Job.objects.get(pk=job["jobId"])
    assert (stored.command, stored.simulated_duration_seconds) == ("python train.py", None)


def test_list_service_jobs_is_newest_first_running_by_default_and_pages(aws, admin, scientist):
    setup_queue(admin, capacity=10)
    add_share(admin, "qs1", limit=10)
    add_share(admin, "qs2", limit=1, strategy="LEND")
    ids = [submit(scientist, f"job-{i}")["jobId"] for i in range(5)]
    other = submit(scientist, "other-share", share="qs2")["jobId"]
    assert scientist.list_service_jobs(jobQueue="jq")["jobSummaryList"] == []  # none RUNNING
    pages = scientist.get_paginator("list_service_jobs").paginate(
        jobQueue="jq", jobStatus="RUNNABLE", PaginationConfig={"PageSize": 2}
    )
    seen = [[s["jobId"] for s in p["jobSummaryList"]] for p in pages]
    assert [len(chunk) for chunk in seen] == [2, 2, 2]
    assert [i for chunk in seen for i in chunk] == [other, *reversed(ids)]

    by_share = scientist.list_service_jobs(
        jobQueue="jq",
        jobStatus="RUNNABLE",
        filters=[{"name": "QUOTA_SHARE_NAME", "values": ["qs2"]}],
    )
    assert [s["jobId"] for s in by_share["jobSummaryList"]] == [other]
    by_name = scientist.list_service_jobs(
        jobQueue="jq", filters=[{"name": "JOB_NAME", "values": ["JOB-*"]}]
    )
    assert len(by_name["jobSummaryList"]) == 5  # case-insensitive prefix, any status
    created = {s["jobId"]: s["createdAt"] for s in by_name["jobSummaryList"]}
    after = scientist.list_service_jobs(
        jobQueue="jq",
        filters=[{"name": "AFTER_CREATED_AT", "values": [str(created[ids[2]])]}],
    )
    assert {s["jobId"] for s in after["jobSummaryList"]} == {ids[3], ids[4], other}
    before = scientist.list_service_jobs(
        jobQueue="jq",
        filters=[{"name": "BEFORE_CREATED_AT", "values": [str(created[ids[1]])]}],
    )
    assert [s["jobId"] for s in before["jobSummaryList"]] == [ids[0]]

    aws.tick("jq")
    running = scientist.list_service_jobs(jobQueue="jq")["jobSummaryList"]
    assert {s["status"] for s in running} == {"SCHEDULED"} or len(running) == 0
    aws.tick("jq")
    running = scientist.list_service_jobs(jobQueue="jq")["jobSummaryList"]
    assert sorted(s["jobId"] for s in running) == sorted([*ids, other])

    shares = admin.get_paginator("list_quota_shares").paginate(
        jobQueue="jq", PaginationConfig={"PageSize": 1}
    )
    assert [[s["quotaShareName"] for s in p["quotaShares"]] for p in shares] == [["qs1"], ["qs2"]]
    _, code, message = error_of(scientist.list_service_jobs, jobQueue="jq", nextToken="forged")
    assert (code, message) == ("ClientException", "nextToken is not valid for this operation")


def test_snapshot_shows_the_front_of_the_queue_and_share_utilization(aws, admin, scientist):
    setup_queue(admin, capacity=2)
    add_share(admin, "qs1", limit=1)
    add_share(admin, "qs2", limit=1, strategy="RESERVE")
    first = submit(scientist, "first", schedulingPriority=5)
    second = submit(scientist, "second", schedulingPriority=1)
    waiting = submit(scientist, "waiting")
    aws.tick("jq")
    snapshot = scientist.get_job_queue_snapshot(jobQueue="jq")
    front = [entry["jobArn"] for entry in snapshot["frontOfQueue"]["jobs"]]
    # first runs on qs1's limit; qs2 reserves its instance, so nothing is left to borrow.
    assert front == [second["jobArn"], waiting["jobArn"]]
    assert snapshot["frontOfQuotaShares"]["quotaShares"]["qs1"][0]["jobArn"] == second["jobArn"]
    usage = snapshot["queueUtilization"]
    assert usage["totalCapacityUsage"] == [{"capacityUnit": UNIT, "quantity": 1}]
    assert usage["quotaShareUtilization"]["topCapacityUtilization"] == [
        {"quotaShareName": "qs1", "capacityUsage": [{"capacityUnit": UNIT, "quantity": 1}]}
    ]
    assert scientist.describe_service_job(jobId=first["jobId"])["status"] == "SCHEDULED"


def test_tags_on_every_kind_of_resource(admin, scientist):
    policy, env = setup_queue(admin)
    share = add_share(admin, "qs1")
    job = submit(scientist, "tagged", tags={"a": "1"})
    queue_arn = admin.describe_job_queues()["jobQueues"][0]["jobQueueArn"]
    for arn in (policy["arn"], env["serviceEnvironmentArn"], queue_arn, share):
        admin.tag_resource(resourceArn=arn, tags={"team": "vision", "tier": "gold"})
        admin.untag_resource(resourceArn=arn, tagKeys=["tier", "missing"])
        assert admin.list_tags_for_resource(resourceArn=arn)["tags"] == {"team": "vision"}
    scientist.tag_resource(resourceArn=job["jobArn"], tags={"b": "2"})
    assert scientist.list_tags_for_resource(resourceArn=job["jobArn"])["tags"] == {
        "a": "1",
        "b": "2",
    }
    status, code, _ = error_of(scientist.tag_resource, resourceArn=share, tags={"x": "y"})
    assert (status, code) == (403, "AccessDeniedException")
    _, code, message = error_of(
        admin.tag_resource, resourceArn=share, tags={f"k{i}": "v" for i in range(60)}
    )
    assert (code, message) == ("ClientException", "tags: at most 50 tags, got 61")


def test_client_exceptions_name_what_to_fix(admin, scientist):
    policy, env = setup_queue(admin)
    add_share(admin, "qs1")
    duplicates = [
        (
            admin.create_scheduling_policy,
            {
                "name": "jq-policy",
                "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"},
            },
        ),
        (
            admin.create_service_environment,
            {
                "serviceEnvironmentName": "jq-env",
                "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": 1}],
            },
        ),
        (
            admin.create_job_queue,
            {
                "jobQueueName": "jq",
                "priority": 1,
                "schedulingPolicyArn": policy["arn"],
                "serviceEnvironmentOrder": [{"order": 1, "serviceEnvironment": "jq-env"}],
            },
        ),
    ]
    for call, arguments in duplicates:
        assert error_of(call, **arguments)[:2] == (400, "ClientException")
        assert "already exists" in error_of(call, **arguments)[2]
    assert "already exists" in error_of(add_share, admin, "qs1")[2]

    def message(*args, **kwargs):
        status, code, text = error_of(*args, **kwargs)
        assert (status, code) == (400, "ClientException")
        return text

    no_config = json.dumps({"TrainingJobName": "x"})
    assert "ResourceConfig" in message(submit, scientist, "j", serviceRequestPayload=no_config)
    assert "not valid JSON" in message(submit, scientist, "j", serviceRequestPayload="{oops")
    assert "quotaShareName is required" in message(
        scientist.submit_service_job,
        jobName="j",
        jobQueue="jq",
        serviceJobType="SAGEMAKER_TRAINING",
        serviceRequestPayload=payload(),
    )
    assert "shareIdentifier" in message(submit, scientist, "j", shareIdentifier="a")
    assert "schedulingPriority" in message(submit, scientist, "j", schedulingPriority=10000)
    assert "Job queue nope does not exist" in message(submit, scientist, "j", queue="nope")
    assert "quota share ghost does not exist" in message(submit, scientist, "j", share="ghost")
    assert "borrowLimit" in message(
        admin.create_quota_share,
        quotaShareName="bad",
        jobQueue="jq",
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 1}],
        resourceSharingConfiguration={"strategy": "RESERVE", "borrowLimit": 50},
        preemptionConfiguration={"inSharePreemption": "DISABLED"},
    )
    assert "strategy must be one of" in message(
        admin.update_quota_share,
        quotaShareArn=admin.list_quota_shares(jobQueue="jq")["quotaShares"][0]["quotaShareArn"],
        resourceSharingConfiguration={"strategy": "BOGUS"},
    )
    assert "does not exist" in message(
        admin.describe_quota_share, quotaShareArn="arn:aws:batch:x:1:job-queue/jq/quota-share/no"
    )
    assert "Service job nope does not exist" in message(
        scientist.describe_service_job, jobId="nope"
    )

    first = submit(scientist, "same", clientToken="tok-1")
    assert submit(scientist, "same", clientToken="tok-1")["jobId"] == first["jobId"]
    assert "already used for a different request" in message(
        submit, scientist, "different", clientToken="tok-1"
    )
    assert Job.objects.filter(client_token="tok-1").count() == 1


def test_permissions_are_the_rest_apis(aws, admin, scientist):
    setup_queue(admin)
    add_share(admin, "qs1")
    add_share(admin, "private", tags={"quotaportal:team": "vision"})
    aws.user("vic", teams=["vision"])
    status, code, message = error_of(add_share, scientist, "mine")
    assert (status, code) == (403, "AccessDeniedException")
    assert "only admins" in message
    status, code, _ = error_of(submit, scientist, "sneaky", share="private")
    assert (status, code) == (403, "AccessDeniedException")
    job = submit(scientist, "sams")
    vic = aws.client("vic")
    assert vic.describe_service_job(jobId=job["jobId"])["jobName"] == "sams"  # reads are open
    status, code, _ = error_of(vic.update_service_job, jobId=job["jobId"], schedulingPriority=1)
    assert (status, code) == (403, "AccessDeniedException")
    result = vic.terminate_service_jobs(jobs=[job["jobId"], "gone"], reason="no")
    assert result["successful"] == ["gone"]
    assert result["errors"][0]["code"] == "AccessDeniedException"
    result = scientist.terminate_service_jobs(jobs=[job["jobArn"]], reason="done")
    assert (result["successful"], result["errors"]) == ([job["jobArn"]], [])


def test_signatures_are_checked(aws, live_server, admin):
    endpoint = f"{live_server.url}/aws/batch"
    key_id, secret = aws.keys["ada"]
    wrong = secret[:-1] + ("x" if secret[-1] != "x" else "y")
    wrong_secret = aws.track(batch_client(endpoint, key_id, wrong))
    status, code, _ = error_of(wrong_secret.list_scheduling_policies)
    assert (status, code) == (403, "InvalidSignatureException")
    unknown = aws.track(batch_client(endpoint, "QPAKNOTAREALKEY00000", secret))
    status, code, _ = error_of(unknown.list_scheduling_policies)
    assert (status, code) == (403, "UnrecognizedClientException")
    import requests

    unsigned = requests.post(f"{endpoint}/v1/listschedulingpolicies", json={}, timeout=10)
    assert unsigned.status_code == 403
    assert unsigned.headers["x-amzn-ErrorType"] == "MissingAuthenticationTokenException"
    assert admin.list_scheduling_policies()["schedulingPolicies"] == []  # the real key works


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1, 2]", "the request body must be a JSON object"),
        (b"{not json", "the request body is not valid JSON"),
        (b'{"jobName": "a\\u0000b"}', "contains a NUL character"),
        (b'{"jobName": "\\ud800"}', "lone surrogate"),
        (b'{"jobName": 5, "jobQueue": "jq"}', "jobName must be a string"),
        (
            json.dumps(
                {
                    "jobName": "j",
                    "jobQueue": "jq",
                    "serviceJobType": "SAGEMAKER_TRAINING",
                    "quotaShareName": "qs1",
                    "serviceRequestPayload": json.dumps({"pad": "x" * 300_000}),
                }
            ).encode(),
            "serviceRequestPayload is larger than 262,144 bytes",
        ),
        (
            json.dumps(
                {
                    "jobName": "j",
                    "jobQueue": "jq",
                    "serviceJobType": "SAGEMAKER_TRAINING",
                    "quotaShareName": "qs1",
                    "serviceRequestPayload": '{"ResourceConfig": {"InstanceType": "\\u0000"}}',
                }
            ).encode(),
            "serviceRequestPayload.ResourceConfig.InstanceType contains a NUL character",
        ),
        (
            json.dumps(
                {
                    "jobName": "j",
                    "jobQueue": "jq",
                    "serviceJobType": "SAGEMAKER_TRAINING",
                    "quotaShareName": "qs1",
                    "serviceRequestPayload": payload(count=0),
                }
            ).encode(),
            "ResourceConfig.InstanceCount must be a whole number of at least 1",
        ),
    ],
)
def test_hostile_bodies_get_a_client_exception_that_says_what_to_fix(aws, admin, body, message):
    setup_queue(admin)
    add_share(admin, "qs1")
    answer = signed_post(aws, "sam", "submitservicejob", body)
    assert answer.status_code == 400, answer.text
    assert answer.headers["x-amzn-ErrorType"] == "ClientException"
    assert message in answer.json()["message"]
    assert answer.json()["__type"] == "ClientException"
    assert not Job.objects.exists()


def test_an_old_signature_is_refused_as_expired(aws):
    import requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = f"{aws.endpoint}/v1/listschedulingpolicies"
    request = AWSRequest("POST", url, data=b"{}", headers={"Content-Type": "application/json"})
    auth = SigV4Auth(Credentials(*aws.keys["ada"]), "batch", "us-east-1")
    old = (timezone.now() - timedelta(minutes=20)).strftime("%Y%m%dT%H%M%SZ")
    request.context["timestamp"] = old
    request.headers["X-Amz-Date"] = old
    canonical = auth.canonical_request(request)
    signature = auth.signature(auth.string_to_sign(request, canonical), request)
    auth._inject_signature_to_request(request, signature)
    answer = requests.post(url, data=b"{}", headers=dict(request.headers), timeout=10)
    assert answer.status_code == 403
    assert answer.headers["x-amzn-ErrorType"] == "InvalidSignatureException"
    assert "Signature expired" in answer.json()["message"]
