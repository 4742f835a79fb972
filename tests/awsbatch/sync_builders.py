"""Builders the tests share."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber
from django.utils import timezone

from quotaportal.awsbatch.models import MirroredResource, MirrorKind
from quotaportal.awsbatch.sync import client as aws_client
from quotaportal.awsbatch.sync.comparable import (
    AWS_ACTIVE,
    environment_config,
    queue_config,
    share_config,
    submit_request,
)
from quotaportal.awsbatch.sync.mirror import share_key
from quotaportal.quotas import services
from quotaportal.quotas.models import CapacityUnit, SchedulerRun
from quotaportal.tick import bridge
from quotaportal.tick.run import run_tick
from tests.builders import add_share

UNIT = "ml.g5.xlarge"


ARN = "arn:aws:batch:us-west-2:123456789012"


class Aws:
    """One AWS_BATCH queue whose configuration AWS already agrees with, and its stub."""

    def __init__(self, admin, name="gpu", env_name="aws"):
        self.admin = admin
        if not CapacityUnit.objects.filter(name=UNIT).exists():
            services.create_capacity_unit(admin, name=UNIT)
        self.env = services.create_service_environment(
            admin,
            name=env_name,
            backend="AWS_BATCH",
            region="us-west-2",
            capacity_limits={UNIT: 3},
        )
        self.queue = services.create_job_queue(
            admin,
            name=name,
            scheduling_policy=services.create_scheduling_policy(admin, name=f"{name}-fifo"),
            service_environment=self.env,
        )
        self.client, self.stub = stubbed_client()
        aws_client.use_client(self.env, self.client)
        self.stub.activate()

    def share(self, name, team, limit=1, strategy="LEND_AND_BORROW", **fields):
        share = add_share(self.admin, self.queue, name, team, limit, strategy, unit=UNIT, **fields)
        self.agree()
        return share

    def agree(self, when=None):
        """Record the portal's configuration as what AWS has (as after a sync)."""
        when = when or timezone.now()
        rows = [
            (MirrorKind.POLICY, self.queue.scheduling_policy.name, {}),
            (
                MirrorKind.ENVIRONMENT,
                self.env.name,
                environment_config(bridge.environment_limits(self.env), self.env.state),
            ),
            (MirrorKind.QUEUE, self.queue.name, queue_config(self.queue)),
        ] + [
            (MirrorKind.SHARE, share_key(self.queue.name, s.name), share_config(s))
            for s in self.queue.quota_shares.all()
        ]
        for kind, name, config in rows:
            MirroredResource.objects.update_or_create(
                environment=self.env,
                kind=kind,
                name=name,
                defaults={"arn": f"{ARN}:{kind}/{name}", "synced": config, "checked_at": when},
            )

    def expect_lists(self, by_status: dict | None = None):
        """The pull's ListServiceJobs, one page per active status."""
        by_status = by_status or {}
        for status in AWS_ACTIVE:
            self.stub.add_response(
                "list_service_jobs",
                {"jobSummaryList": by_status.get(status, [])},
                {"jobQueue": self.queue.name, "jobStatus": status, "maxResults": 100},
            )

    def expect_submit(self, job, aws_id):
        self.stub.add_response(
            "submit_service_job",
            {"jobArn": f"{ARN}:service-job/{aws_id}", "jobName": job.name, "jobId": aws_id},
            submit_request(job, job.scheduling_priority),
        )

    def expect_snapshot(self, front=()):
        self.stub.add_response(
            "get_job_queue_snapshot",
            {"frontOfQueue": {"jobs": [{"jobArn": a, "earliestTimeAtPosition": 0} for a in front]}},
            {"jobQueue": self.queue.name},
        )

    def expect_config(self, shares: list[dict]):
        """A drift check: AWS describes the environment and queue as agreed, and `shares`."""
        self.stub.add_response(
            "describe_service_environments",
            {
                "serviceEnvironments": [
                    {
                        "serviceEnvironmentName": self.env.name,
                        "serviceEnvironmentArn": f"{ARN}:service-environment/{self.env.name}",
                        "serviceEnvironmentType": "SAGEMAKER_TRAINING",
                        "state": "ENABLED",
                        "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": 3}],
                    }
                ]
            },
            {"serviceEnvironments": [self.env.name]},
        )
        self.stub.add_response(
            "describe_job_queues",
            {
                "jobQueues": [
                    {
                        "jobQueueName": self.queue.name,
                        "jobQueueArn": f"{ARN}:job-queue/{self.queue.name}",
                        "state": "ENABLED",
                        "priority": self.queue.priority,
                        "computeEnvironmentOrder": [],
                    }
                ]
            },
            {"jobQueues": [self.queue.name]},
        )
        self.stub.add_response(
            "list_quota_shares", {"quotaShares": shares}, {"jobQueue": self.queue.name}
        )

    def tick(self, now=None) -> SchedulerRun:
        return run_tick(self.queue.pk, now=now)


def share_detail(arn, *, limit, strategy, name="qs1") -> dict:
    sharing = {"strategy": strategy}
    if strategy == "LEND_AND_BORROW":
        sharing["borrowLimit"] = -1
    return {
        "quotaShareName": name,
        "quotaShareArn": arn,
        "jobQueueArn": f"{ARN}:job-queue/gpu",
        "capacityLimits": [{"capacityUnit": UNIT, "maxCapacity": limit}],
        "resourceSharingConfiguration": sharing,
        "preemptionConfiguration": {"inSharePreemption": "DISABLED"},
        "state": "ENABLED",
    }


def submit(user, aws, name="j", share="qs1", priority=0):
    return services.submit_job(
        user,
        job_queue=aws.queue,
        quota_share=share,
        capacity_unit=UNIT,
        name=name,
        scheduling_priority=priority,
    )


def stubbed_client():
    client = boto3.client(
        "batch", region_name="us-west-2", aws_access_key_id="k", aws_secret_access_key="s"
    )
    return client, Stubber(client)
