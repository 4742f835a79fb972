"""Names as AWS Batch validates them, the same on every interface (REST, web, the AWS
endpoint): a name the portal accepts can be mirrored into AWS and written in a URL or an ARN."""

from __future__ import annotations

import re

# Policies, environments, queues, quota shares and jobs: up to 128 letters, numbers, hyphens
# and underscores. A '/' would break the resource's ARN, a space its URL.
AWS_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")
AWS_NAME_RULE = "1 to 128 letters, digits, - or _ (no spaces or other signs)"
# Capacity units are instance types such as ml.g5.xlarge: dots too, and at most 64.
UNIT_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
UNIT_NAME_RULE = "1 to 64 letters, digits, ., - or _ (no spaces)"


def aws_name_error(name) -> str | None:
    """What is wrong with a name of an AWS Batch resource or job, or None."""
    return _error(name, AWS_NAME, AWS_NAME_RULE)


def unit_name_error(name) -> str | None:
    return _error(name, UNIT_NAME, UNIT_NAME_RULE)


def _error(name, pattern: re.Pattern, rule: str) -> str | None:
    if isinstance(name, str) and pattern.fullmatch(name):
        return None
    if not isinstance(name, str):
        return f"a name is text: use {rule}"
    return f"use {rule}; got {shortened(name)!r}"


def shortened(text: str, most: int = 40) -> str:
    """A value quoted back in an error, cut short: no answer echoes a long bad value."""
    return text if len(text) <= most else f"{text[:most]}… ({len(text):,} characters)"
