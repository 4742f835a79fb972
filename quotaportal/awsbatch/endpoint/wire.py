"""AWS Batch's rest-json conventions: errors, ARNs, times in epoch milliseconds, pagination,
and reading request members with the checks boto3 leaves to the server."""

from __future__ import annotations

import re

from django.core import signing

from quotaportal.quotas import names
from quotaportal.quotas.errors import Forbidden, ServiceError

MAX_RESULTS = 100


class AwsError(Exception):
    """An answer in AWS's error shape: HTTP status, x-amzn-ErrorType and {"__type", "message"}."""

    def __init__(self, message: str, code: str = "ClientException", status: int = 400):
        self.code, self.status, self.message = code, status, message
        super().__init__(message)


# Our services name fields as the REST API does; AWS clients know the AWS member names.
AWS_FIELD_NAMES = {
    "name": "name",
    "quota_share": "quotaShareName",
    "capacity_unit": "capacityUnit",
    "quantity": "InstanceCount",
    "scheduling_priority": "schedulingPriority",
    "retry_attempts": "retryStrategy.attempts",
    "evaluate_on_exit": "retryStrategy.evaluateOnExit",
    "preemption_retries_before_termination": (
        "preemptionConfiguration.preemptionRetriesBeforeTermination"
    ),
    "attempt_duration_seconds": "timeoutConfig.attemptDurationSeconds",
    "client_token": "clientToken",
    "job_queue": "jobQueue",
    "command": "serviceRequestPayload.Environment.QP_COMMAND",
    "capacity_limits": "capacityLimits",
    "sharing_strategy": "resourceSharingConfiguration.strategy",
    "borrow_limit": "resourceSharingConfiguration.borrowLimit",
    "job_state_time_limit_actions": "jobStateTimeLimitActions",
    "tag_keys": "tagKeys",
}


def from_service_error(err: ServiceError) -> AwsError:
    if isinstance(err, Forbidden):
        return AwsError(err.message, "AccessDeniedException", 403)
    if set(err.errors) == {"detail"}:
        return AwsError(err.errors["detail"])
    text = "; ".join(
        f"{AWS_FIELD_NAMES.get(field, field)}: {message}" for field, message in err.errors.items()
    )
    return AwsError(text)


def split_arn(value: str) -> tuple[str, str] | None:
    """('job-queue', 'q') for a Batch ARN of any region or account; None for a plain name."""
    parts = value.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "batch" or "/" not in parts[5]:
        return None
    kind, _, rest = parts[5].partition("/")
    return kind, rest


# Reading members. boto3 checks types and required members only when the caller goes
# through it; any other client may send anything, so every member is checked here.


def required(body: dict, key: str, kind: type = str):
    if key not in body or body[key] is None:
        raise AwsError(f"{key} is required")
    return typed(body, key, kind)


def typed(body: dict, key: str, kind: type, default=None):
    value = body.get(key, default)
    if value is None:
        return default
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise AwsError(f"{key} must be a whole number")
    if not isinstance(value, kind):
        raise AwsError(f"{key} must be {_KIND_NAMES.get(kind, kind.__name__)}")
    if kind is str and not value:
        raise AwsError(f"{key} must not be empty")
    return value


_KIND_NAMES = {str: "a string", dict: "an object", list: "a list", int: "a whole number"}

AWS_NAME, CAPACITY_UNIT = names.AWS_NAME, names.UNIT_NAME  # as every interface checks them


def aws_name(body: dict, key: str) -> str:
    """A required name as AWS validates it."""
    return _matching(required(body, key), key, AWS_NAME, "128 letters, numbers, - and _")


def capacity_unit(body: dict, key: str = "capacityUnit") -> str:
    return _matching(required(body, key), key, CAPACITY_UNIT, "64 letters, numbers, ., - and _")


def _matching(value: str, key: str, pattern: re.Pattern, allowed: str) -> str:
    if pattern.fullmatch(value):
        return value
    raise AwsError(f"{key} must be 1 to {allowed}; got {names.shortened(value)!r}")


def one_of(body: dict, key: str, allowed, default=None):
    value = typed(body, key, str, default)
    if value is not None and value not in allowed:
        raise AwsError(f"{key} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def page(body: dict, items: list, operation: str) -> tuple[list, str | None]:
    """One page of `items` (a list or a queryset, read one row past the page) and the token of
    the next. Tokens are signed offsets: opaque to the client, and refused when forged or
    reused with another operation."""
    limit = typed(body, "maxResults", int, MAX_RESULTS)
    if not 1 <= limit <= MAX_RESULTS:
        raise AwsError(f"maxResults must be between 1 and {MAX_RESULTS}")
    start = 0
    if token := typed(body, "nextToken", str):
        try:
            start = signing.loads(token, salt=f"awsbatch.{operation}")
        except signing.BadSignature:
            raise AwsError("nextToken is not valid for this operation") from None
    chunk = list(items[start : start + limit + 1])
    more = len(chunk) > limit
    chunk = chunk[:limit]
    following = signing.dumps(start + limit, salt=f"awsbatch.{operation}") if more else None
    return chunk, following


def paged(body: dict, items: list, operation: str, key: str, render) -> dict:
    chunk, following = page(body, items, operation)
    answer = {key: [render(item) for item in chunk]}
    if following:
        answer["nextToken"] = following
    return answer
