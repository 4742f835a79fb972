"""Input rules shared by every interface: quota share settings and job submissions.

Each function returns plain-language messages that say what to fix, so the web form, the
REST API, the AWS-compatible endpoint and the scenario runner reject bad input the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

from scheduler.model import UNLIMITED_BORROW, Share, Strategy

MAX_CAPACITY_LIMITS = 5
MAX_SHARES_PER_QUEUE = 20
MIN_PRIORITY, MAX_PRIORITY = 0, 9999
MIN_RETRY_ATTEMPTS, MAX_RETRY_ATTEMPTS = 1, 10  # AWS Batch's bounds on retryStrategy.attempts
# Bounds on counts a person types, so every interface refuses 2**31 with a message instead of
# an integer overflow in the database (AWS accepts no fleet or percentage near these either).
MAX_INSTANCES = 1_000_000
MAX_BORROW_LIMIT = 1_000_000

# A job's numbers, field -> (lowest, highest): the one place they are written. The REST
# serializer's and the web form's fields (value_range), the services' checks (bound_error) and
# the database's check constraints are built from it.
JOB_NUMBERS: dict[str, tuple[int, int]] = {
    "scheduling_priority": (MIN_PRIORITY, MAX_PRIORITY),
    "quantity": (1, 100_000),
    "retry_attempts": (MIN_RETRY_ATTEMPTS, MAX_RETRY_ATTEMPTS),
    "preemption_retries_before_termination": (0, 1_000_000),
    "attempt_duration_seconds": (1, 10_000_000),
    "simulated_duration_seconds": (0, 10_000_000),  # seconds
}
# The numbers that may hold fractions (the rest are whole).
FRACTIONAL_JOB_NUMBERS = frozenset({"simulated_duration_seconds"})
# The numbers a job may leave out: no time limit, requeued after every preemption, and (not
# SIMULATED) no simulated run.
OPTIONAL_JOB_NUMBERS = frozenset(
    {
        "preemption_retries_before_termination",
        "attempt_duration_seconds",
        "simulated_duration_seconds",
    }
)


def value_range(field: str) -> dict[str, int]:
    """A job field's bounds as a form or serializer field's keyword arguments."""
    low, high = JOB_NUMBERS[field]
    return {"min_value": low, "max_value": high}


def bound_error(field: str, value: object) -> str | None:
    """What is wrong with a job field's number, in words; None when it is within bounds."""
    low, high = JOB_NUMBERS[field]
    whole = field not in FRACTIONAL_JOB_NUMBERS
    kinds = int if whole else int | float
    if not isinstance(value, kinds) or isinstance(value, bool):
        return f"{field} must be a {'whole ' if whole else ''}number"
    if not low <= value <= high:
        return f"{field} must be between {_number(low)} and {_number(high)}, got {value}"
    return None


def _number(value: int) -> str:
    return f"{value:,}" if value >= 100_000 else str(value)


def instance_count_error(value: object, minimum: int) -> str | None:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not minimum <= value <= MAX_INSTANCES
    ):
        return f"max_capacity must be a whole number from {minimum} to {MAX_INSTANCES:,}"
    return None


def share_config_errors(
    limits: Mapping[str, int], strategy: str, borrow_limit: int | None
) -> dict[str, str]:
    """Field name -> message for every rule a quota share's settings break (AWS's rules)."""
    errors: dict[str, str] = {}
    if not 1 <= len(limits) <= MAX_CAPACITY_LIMITS:
        errors["capacity_limits"] = (
            f"a quota share needs between 1 and {MAX_CAPACITY_LIMITS} capacity limits, "
            f"got {len(limits)}"
        )
    else:
        bad = [u for u, n in limits.items() if instance_count_error(n, 1)]
        if bad:
            errors["capacity_limits"] = (
                f"{instance_count_error(None, 1)} (check {', '.join(map(str, bad))})"
            )
    if strategy not in Strategy.__members__:
        errors["sharing_strategy"] = (
            f"sharing_strategy must be one of {', '.join(Strategy)}, got {strategy!r}"
        )
    elif borrow_limit is not None:
        if (
            not isinstance(borrow_limit, int)
            or isinstance(borrow_limit, bool)
            or not -1 <= borrow_limit <= MAX_BORROW_LIMIT
        ):
            errors["borrow_limit"] = (
                f"borrow_limit must be a whole number from -1 to {MAX_BORROW_LIMIT:,} "
                "(a percentage; -1 means unlimited)"
            )
        elif strategy != Strategy.LEND_AND_BORROW and borrow_limit != UNLIMITED_BORROW:
            errors["borrow_limit"] = "borrow_limit applies only to the LEND_AND_BORROW strategy"
    return errors


def priority_error(priority: object) -> str | None:
    return bound_error("scheduling_priority", priority)


def submission_error(
    share: Share, unit: str, quantity: int, capacity: Mapping[str, int]
) -> str | None:
    """Why a job of `quantity` instances of `unit` can never run in `share`, or None."""
    if not share.enabled:
        return f"quota share {share.name} is DISABLED and accepts no new jobs"
    if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
        return "quantity must be a whole number of at least 1"
    if share.limit(unit) <= 0:
        units = ", ".join(sorted(share.limits)) or "none"
        return f"quota share {share.name} has no capacity limit for {unit} (its units: {units})"
    ceiling = share.ceiling(unit)
    if ceiling is not None and quantity > ceiling:
        how = (
            f"its limit {share.limit(unit)} plus borrow limit {share.borrow_limit}%"
            if share.strategy is Strategy.LEND_AND_BORROW
            else f"its limit, as {share.strategy} never borrows"
        )
        return (
            f"the job needs {quantity} x {unit} but quota share {share.name} can use at most "
            f"{ceiling} ({how}), so it could never start"
        )
    if quantity > capacity.get(unit, 0):
        return (
            f"the job needs {quantity} x {unit} but the service environment has at most "
            f"{capacity.get(unit, 0)}, so it could never start"
        )
    return None
