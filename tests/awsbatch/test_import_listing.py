"""The importer reads a queue's jobs status by status: a job that moves on between two of
those lists is adopted once (CI saw an import fail on the second RemoteJob for one AWS job)."""

from __future__ import annotations

from quotaportal.awsbatch.sync import importer


class MovingJobCaller:
    """AWS Batch as the importer reads it: one job, RUNNABLE when the RUNNABLE list is read and
    SCHEDULED by the time the SCHEDULED list is."""

    def __init__(self):
        self.described: list[str] = []

    def __call__(self, operation: str, **params):
        answers = {
            "describe_job_queues": {
                "jobQueues": [
                    {
                        "jobQueueName": "q",
                        "jobQueueArn": "arn:queue/q",
                        "schedulingPolicyArn": "arn:policy/p",
                        "serviceEnvironmentOrder": [{"serviceEnvironment": "arn:env/e"}],
                    }
                ]
            },
            "describe_scheduling_policies": {
                "schedulingPolicies": [
                    {"quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}
                ]
            },
            "describe_service_environments": {"serviceEnvironments": [{"name": "e"}]},
        }
        if operation == "describe_service_job":
            self.described.append(params["jobId"])
            return {"jobId": params["jobId"], "status": "SCHEDULED"}
        return answers[operation]

    def pages(self, operation: str, key: str, **params):
        if operation == "list_service_jobs":
            if params["jobStatus"] in ("RUNNABLE", "SCHEDULED"):
                yield {"jobId": "job-1"}
            return
        yield from ()


def test_a_job_listed_under_two_statuses_is_read_once():
    caller = MovingJobCaller()
    found = importer._read(caller, "q", progress=lambda message: None)
    assert [job["jobId"] for job in found.jobs] == ["job-1"]
    assert caller.described == ["job-1"]
