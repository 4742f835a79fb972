"""The AWS_BATCH backend: the portal mirrors its configuration and jobs into AWS Batch with
boto3 and pulls AWS's decisions back (docs/guides/aws-batch.md). AWS schedules these queues;
the portal's planner only explains them.

- client: boto3 clients from the standard credential chain, and a call budget per tick
- shapes: portal rows and AWS answers in one comparable form
- mirror: policy, environment, queue and quota shares, with drift detection
- jobs: submits, priority changes and terminations pushed; statuses, attempts, preemptions
  and queue positions pulled
- backend: the tick's entry point, with backoff and sync health
"""
