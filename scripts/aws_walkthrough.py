#!/usr/bin/env python3
"""AWS's quota-management walkthrough, through the real SageMaker SDK v3, against quotaportal.

Three quota shares with one ml.g5.xlarge each (QS1 LEND_AND_BORROW 200 % with in-share
preemption, QS2 LEND, QS3 RESERVE) on a 3-instance environment. Three QS1 jobs at priorities
3/2/1: high runs on QS1's instance, med borrows QS2's, low waits (QS3 reserves its own). A QS2
job takes QS2's instance back (cross-share preemption of med). Raising low to 4 preempts high
(in-share preemption). Each step prints what AWS documents and what the server answered.

    export AWS_ENDPOINT_URL_BATCH=http://127.0.0.1:8000/aws/batch
    export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...   # manage.py create_aws_key ADMIN
    python scripts/aws_walkthrough.py [--team TEAM] [--timeout 60]

The key's user must be an admin (it creates the shares) and submits the jobs too; with
--scientist-key ID:SECRET a team member submits them instead (the shares are owned by --team).
Needs `pip install sagemaker==3.27.0` (a test dependency of quotaportal). Exit status 0 when
every outcome matches AWS's.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable

UNIT = "ml.g5.xlarge"
DISPATCHED = ("SCHEDULED", "STARTING", "RUNNING")
SDK_SETTINGS = {  # what the SDK needs to build a training request without reaching AWS
    "AWS_EC2_METADATA_DISABLED": "true",
    "SAGEMAKER_VALIDATE_ROLE": "false",
}


def configure_sdk(endpoint: str, key_id: str, secret: str, region: str = "us-west-2") -> None:
    """The SDK makes its own boto3 clients from the environment, so that is where this goes."""
    os.environ.update(
        SDK_SETTINGS,
        AWS_ENDPOINT_URL_BATCH=endpoint,
        AWS_DEFAULT_REGION=region,
        AWS_ACCESS_KEY_ID=key_id,
        AWS_SECRET_ACCESS_KEY=secret,
    )


def create_shares(batch, name: str, team: str) -> str:
    """Policy, 3-instance environment, queue and the three shares; the queue's name. A queue
    of that name left by an earlier run (DISABLED, holding its jobs' history) is used again."""
    found = batch.describe_job_queues(jobQueues=[name])["jobQueues"]
    if found:
        for order in found[0]["serviceEnvironmentOrder"]:
            batch.update_service_environment(
                serviceEnvironment=order["serviceEnvironment"], state="ENABLED"
            )
        batch.update_job_queue(jobQueue=name, state="ENABLED")
    else:
        policy = batch.create_scheduling_policy(
            name=name, quotaSharePolicy={"idleResourceAssignmentStrategy": "FIFO"}
        )
        env = batch.create_service_environment(
            serviceEnvironmentName=name,
            serviceEnvironmentType="SAGEMAKER_TRAINING",
            capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 3}],
        )
        batch.create_job_queue(
            jobQueueName=name,
            priority=1,
            schedulingPolicyArn=policy["arn"],
            serviceEnvironmentOrder=[
                {"order": 1, "serviceEnvironment": env["serviceEnvironmentArn"]}
            ],
        )
    shares = [
        ("QS1", {"strategy": "LEND_AND_BORROW", "borrowLimit": 200}, "ENABLED"),
        ("QS2", {"strategy": "LEND"}, "DISABLED"),
        ("QS3", {"strategy": "RESERVE"}, "DISABLED"),
    ]
    for share, sharing, in_share in shares:
        batch.create_quota_share(
            quotaShareName=share,
            jobQueue=name,
            capacityLimits=[{"capacityUnit": UNIT, "maxCapacity": 1}],
            resourceSharingConfiguration=sharing,
            preemptionConfiguration={"inSharePreemption": in_share},
            tags={"quotaportal:team": team},
        )
    return name


def remove_shares(batch, name: str) -> None:
    """Undo create_shares as far as the portal allows: the shares are deleted (DISABLED
    first), the queue and its environment DISABLED. The queue keeps its jobs' history (the
    portal deletes no queue holding jobs), and the next run uses it again."""
    queue = batch.describe_job_queues(jobQueues=[name])["jobQueues"][0]
    for share in batch.list_quota_shares(jobQueue=name)["quotaShares"]:
        batch.update_quota_share(quotaShareArn=share["quotaShareArn"], state="DISABLED")
        batch.delete_quota_share(quotaShareArn=share["quotaShareArn"])
    batch.update_job_queue(jobQueue=name, state="DISABLED")
    for order in queue["serviceEnvironmentOrder"]:
        batch.update_service_environment(
            serviceEnvironment=order["serviceEnvironment"], state="DISABLED"
        )


def trainer(base_job_name: str):
    from sagemaker.train.configs import Compute, OutputDataConfig, StoppingCondition
    from sagemaker.train.model_trainer import ModelTrainer

    return ModelTrainer(
        training_image="123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1",
        role="arn:aws:iam::123456789012:role/SageMakerRole",
        base_job_name=base_job_name,
        compute=Compute(instance_type=UNIT, instance_count=1),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=3600),
        output_data_config=OutputDataConfig(s3_output_path="s3://walkthrough/output"),
    )


class Walkthrough:
    def __init__(self, queue_name: str, settle: Callable[[], None], timeout: float, out=print):
        from sagemaker.train.aws_batch.training_queue import TrainingQueue

        self.queue = TrainingQueue(queue_name)
        self.settle, self.timeout, self.out = settle, timeout, out
        self.jobs = {}
        self.failures = []

    def submit(self, name: str, share: str, priority: int) -> None:
        self.jobs[name] = self.queue.submit(
            trainer(name), inputs=None, job_name=name, quota_share_name=share, priority=priority
        )

    def status(self, name: str) -> str:
        return self.jobs[name].describe()["status"]

    def expect(self, step: str, wanted: dict[str, tuple[str, ...]]) -> None:
        """Let the scheduler run until every job is in one of its wanted states, or time out."""
        deadline = time.monotonic() + self.timeout
        while True:
            self.settle()
            seen = {name: self.status(name) for name in wanted}
            if all(seen[name] in states for name, states in wanted.items()):
                break
            if time.monotonic() > deadline:
                self.failures.append(step)
                break
            time.sleep(0.5)
        mark = "FAILED" if step in self.failures else "ok"
        self.out(f"[{mark}] {step}: " + ", ".join(f"{n} {s}" for n, s in seen.items()))

    def running_in(self, share: str, wanted: str) -> list[str]:
        """QS1's RUNNING jobs once `wanted` has gone from SCHEDULED to RUNNING."""
        deadline = time.monotonic() + self.timeout
        while True:
            self.settle()
            names = sorted(
                j.job_name for j in self.queue.list_jobs_by_share(quota_share_name=share)
            )
            if wanted in names or time.monotonic() > deadline:
                return names
            time.sleep(0.5)

    def run(self) -> list[str]:
        runnable = ("RUNNABLE",)
        for name, priority in (("qs1-high", 3), ("qs1-med", 2), ("qs1-low", 1)):
            self.submit(name, "QS1", priority)
        self.expect(
            "high runs on QS1's instance, med borrows QS2's, low waits (QS3 reserves its own)",
            {"qs1-high": DISPATCHED, "qs1-med": DISPATCHED, "qs1-low": runnable},
        )
        self.submit("qs2-job", "QS2", 1)
        self.expect(
            "a QS2 job takes its instance back: med is preempted (cross-share)",
            {"qs2-job": DISPATCHED, "qs1-med": runnable, "qs1-high": DISPATCHED},
        )
        self.jobs["qs1-low"].update(scheduling_priority=4)
        self.expect(
            "low raised to 4 preempts high (in-share)",
            {"qs1-low": DISPATCHED, "qs1-high": runnable, "qs2-job": DISPATCHED},
        )
        self.out(f"QS1 jobs RUNNING (list_jobs_by_share): {self.running_in('QS1', 'qs1-low')}")
        preempted = self.jobs["qs1-high"].describe().get("preemptionSummary", {})
        self.out(f"qs1-high preemptionSummary: {preempted}")
        for job in self.jobs.values():
            job.terminate(reason="walkthrough finished")
        self.out("all walkthrough jobs terminated")
        return self.failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--team", default="walkthrough", help="team that owns the three shares")
    parser.add_argument("--timeout", type=float, default=60, help="seconds to wait per step")
    parser.add_argument("--scientist-key", help="ID:SECRET of a team member to submit with")
    parser.add_argument(
        "--queue", default="walkthrough", help="job queue to run in (made, or used again)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the shares to look at")
    args = parser.parse_args(argv)
    endpoint = os.environ.get("AWS_ENDPOINT_URL_BATCH")
    key_id, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if not (endpoint and key_id and secret):
        parser.error(
            "set AWS_ENDPOINT_URL_BATCH (http://HOST:8000/aws/batch), AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (manage.py create_aws_key ADMIN prints the pair)"
        )
    import boto3

    logging.basicConfig(level=logging.WARNING)
    for noisy in ("botocore", "sagemaker"):  # the SDK logs every endpoint lookup at INFO
        logging.getLogger(noisy).setLevel(logging.WARNING)
    configure_sdk(endpoint, key_id, secret)
    admin = boto3.client("batch")
    queue = create_shares(admin, args.queue, args.team)
    print(f"job queue {queue}: QS1 LEND_AND_BORROW 200 %, QS2 LEND, QS3 RESERVE, 1 {UNIT} each")
    try:
        if args.scientist_key:
            scientist_id, _, scientist_secret = args.scientist_key.partition(":")
            configure_sdk(endpoint, scientist_id, scientist_secret)
        failures = Walkthrough(queue, settle=lambda: None, timeout=args.timeout).run()
    finally:
        if args.keep:
            print(f"kept job queue {queue} and its shares as they are (--keep)")
        else:
            remove_shares(admin, queue)
            print(
                f"removed the shares of job queue {queue}; the queue and its environment are "
                "DISABLED, holding the jobs' history, and the next run uses them again"
            )
    print("every outcome matches AWS's" if not failures else f"{len(failures)} step(s) differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
