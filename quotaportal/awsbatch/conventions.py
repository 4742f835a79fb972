"""What the endpoint, the sync and the job events share about AWS: the tags quotaportal reads on
AWS resources (the endpoint is asked to make them, the sync finds them), ARNs and times in epoch
milliseconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings

BACKEND_TAG = "quotaportal:backend"  # an environment made through the endpoint: LOCAL or not
TEAM_TAG = "quotaportal:team"  # the team a quota share belongs to
SIMULATED_SECONDS_TAG = "quotaportal:simulated-seconds"  # how long a SIMULATED job runs

SAGEMAKER_TRAINING = "SAGEMAKER_TRAINING"  # the one service job type

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def ms(moment: datetime | None) -> int | None:
    """Whole milliseconds since the epoch, in integers (a float would round some up)."""
    return None if moment is None else (moment - EPOCH) // timedelta(milliseconds=1)


def arn_prefix() -> str:
    return f"arn:aws:batch:{settings.QP_AWS_REGION}:{settings.QP_AWS_ACCOUNT_ID}:"


def arn(kind: str, name: str) -> str:
    return f"{arn_prefix()}{kind}/{name}"


def share_arn(queue_name: str, share_name: str) -> str:
    return f"{arn('job-queue', queue_name)}/quota-share/{share_name}"
