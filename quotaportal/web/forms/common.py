"""What every form of the pages shares: service messages in the words of the form's labels,
and capacity written as unit=count pairs."""

from __future__ import annotations

import re

from django import forms

from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.names import shortened

# Service messages name API fields; a form shows the words on its labels instead.
FIELD_WORDS = {
    "max_capacity": "max capacity",
    "borrow_limit": "borrow limit",
    "sharing_strategy": "sharing strategy",
    "capacity_limits": "capacity limits",
    "scheduling_priority": "priority",
    "quota_share": "quota share",
    "capacity_unit": "capacity unit",
    "retry_attempts": "retry attempts",
    "preemption_retries_before_termination": "preemption retries",
    "simulated_duration_seconds": "simulated duration",
}
API_WORD = re.compile(r"\b(" + "|".join(FIELD_WORDS) + r")\b")


def in_plain_words(message: str) -> str:
    text = API_WORD.sub(lambda m: FIELD_WORDS[m.group(1)], message)
    return text[:1].upper() + text[1:]


def show_service_errors(form: forms.Form, err: ServiceError) -> None:
    """Put each service message next to its field (or at the top when no field matches)."""
    for field, message in err.errors.items():
        form.add_error(field if field in form.fields else None, in_plain_words(message))


UNIT_COUNTS = re.compile(r"^\s*([^=,\s]+)\s*=\s*(\d+)\s*$")


def parse_unit_counts(text: str) -> dict[str, int]:
    """'a100=2, h100=1' as {"a100": 2, "h100": 1}, or a ValidationError saying how to write it."""
    counts: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        match = UNIT_COUNTS.match(part)
        if not match:
            raise forms.ValidationError(
                f"{shortened(part.strip())!r}: write unit=count pairs separated by commas, "
                "e.g. a100=2"
            )
        if match[1] in counts:
            raise forms.ValidationError(f"{shortened(match[1])} appears twice")
        counts[match[1]] = int(match[2])
    return counts


def unit_counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{unit}={count}" for unit, count in sorted(counts.items()))
