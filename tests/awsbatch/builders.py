"""Builders the tests share."""

from __future__ import annotations

import json

import boto3
from botocore.config import Config


def batch_client(endpoint: str, access_key: str, secret: str):
    return boto3.client(
        "batch",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}),
    )


UNIT = "ml.g5.xlarge"


def payload(count=1, unit=UNIT, **extra) -> str:
    return json.dumps(
        {
            "TrainingJobName": "train",
            "ResourceConfig": {"InstanceType": unit, "InstanceCount": count, "VolumeSizeInGB": 30},
            **extra,
        }
    )


def setup_queue(admin, *, capacity=3, backend_tags=None, queue="jq"):
    policy = admin.create_scheduling_policy(
        name=f"{queue}-policy", quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}
    )
    env = admin.create_service_environment(
        serviceEnvironmentName=f"{queue}-env",
        serviceEnvironmentType="SAGEMAKER_TRAINING",
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": capacity}],
        tags=backend_tags or {},
    )
    admin.create_job_queue(
        jobQueueName=queue,
        priority=10,
        schedulingPolicyArn=policy["arn"],
        serviceEnvironmentOrder=[{"order": 1, "serviceEnvironment": env["serviceEnvironmentArn"]}],
    )
    return policy, env


def add_share(admin, name, strategy="LEND_AND_BORROW", limit=1, queue="jq", **extra):
    sharing = {"strategy": strategy}
    if strategy == "LEND_AND_BORROW":
        sharing["borrowLimit"] = extra.pop("borrow_limit", 200)
    return admin.create_quota_share(
        quotaShareName=name,
        jobQueue=queue,
        capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": limit}],
        resourceSharingConfiguration=sharing,
        preemptionConfiguration={"inSharePreemption": extra.pop("in_share", "DISABLED")},
        **extra,
    )["quotaShareArn"]


def signed_post(aws, username: str, operation: str, body: bytes):
    """A request signed as botocore signs, with any body at all (boto3 would refuse these)."""
    import requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = f"{aws.endpoint}/v1/{operation}"
    request = AWSRequest("POST", url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(Credentials(*aws.keys[username]), "batch", "eu-west-1").add_auth(request)
    return requests.post(url, data=body, headers=dict(request.headers), timeout=10)


REGION = "us-west-2"
