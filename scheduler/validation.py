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
    if not isinstance(priority, int) or isinstance(priority, bool):
        return "scheduling_priority must be a whole number"
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        return (
            f"scheduling_priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {priority}"
        )
    return None


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
