"""Quota review: what a period's usage says about each share's terms, and limits suggested
from the demand measured, replayed as a what-if on the period's own jobs.

The suggestion's rule (docs/guides/usage.md says it for admins):
- A share's new limit per unit is the instances it used (own and borrowed) in its busiest
  hours: the 90th percentile of its hourly average over the period's complete hours, rounded
  up, and never less than its largest job of the period. A share that used nothing keeps its
  limit (the period says nothing about it).
- When the suggested limits of a unit add up to more than the environment's capacity, they
  are scaled down in proportion (each kept at 1 or more).
- A RESERVE share that held capacity idle while other shares' jobs waited becomes LEND: it
  keeps its limit and takes it back by preemption when its jobs come. A LEND share whose jobs
  waited while others' capacity sat idle becomes LEND_AND_BORROW (no borrow ceiling).
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import Max, Sum

from quotaportal.quotas.models import Job, JobQueue, QuotaShare
from quotaportal.usage import reports
from quotaportal.usage.models import HOUR, UsageHour
from quotaportal.whatif import runs as whatif

BUSY_QUANTILE = 0.9
# Flags: what is worth an admin's look, as fractions of the share's entitlement.
MOSTLY_UNUSED = 0.5
WORTH_A_LOOK = 0.05


def worth_a_look(seconds: float, entitled: float) -> bool:
    """Instance-seconds enough to matter beside a share's entitlement (and never a sliver
    such as "0.0 instance-hours")."""
    return seconds > WORTH_A_LOOK * max(entitled, 3600)


def flags(row: dict, strategy: str) -> list[str]:
    """What a share's figures over a period say about its terms, in plain words."""
    found = []
    entitled = row["entitled_instance_seconds"]
    idle = row["idle_while_waiting_instance_seconds"]
    beside = row["waited_beside_idle_instance_seconds"]
    used = row["own_instance_seconds"] / entitled if entitled else None
    if strategy == "RESERVE" and worth_a_look(idle, entitled):
        found.append(
            f"RESERVE held {idle / 3600:,.1f} instance-hours idle while other shares' jobs "
            "waited; LEND would have lent them and still taken them back on demand"
        )
    elif used is not None and used < MOSTLY_UNUSED and idle > WORTH_A_LOOK * entitled:
        found.append(
            f"used {used:.0%} of its entitlement while other shares' jobs waited for "
            f"{idle / 3600:,.1f} instance-hours it left idle"
        )
    if worth_a_look(beside, entitled):
        found.append(
            f"its jobs waited while {beside / 3600:,.1f} instance-hours sat idle in other "
            "shares (its limit, strategy or borrow limit kept them from it)"
        )
    return found


def suggested_draft(queue: JobQueue, start: datetime, end: datetime) -> tuple[dict, list[str]]:
    """Today's settings with the suggested limits and strategies, and why, one line each."""
    draft = whatif.draft_of(queue)
    largest = _largest_jobs(queue, start, end)
    busy = _busy_use(queue, start, end, largest)
    review = {row["key"]: row for row in _share_rows(queue, start, end)}
    reasons = []
    for share in draft["shares"]:
        limits = dict(share["limits"])
        for unit in set(limits) | set(busy.get(share["name"], {})):
            wanted = busy.get(share["name"], {}).get(unit)
            if wanted:
                limits[unit] = wanted
        strategy, why = _strategy(share["strategy"], review.get(share["name"]))
        if limits != share["limits"]:
            reasons.append(
                f"{share['name']}: limits {_limits_text(share['limits'])} → "
                f"{_limits_text(limits)} (its busiest hours' use)"
            )
        if strategy != share["strategy"]:
            ceiling = ", with no borrow ceiling" if strategy == "LEND_AND_BORROW" else ""
            reasons.append(
                f"{share['name']}: strategy {share['strategy']} → {strategy}{ceiling} ({why})"
            )
            share["borrow_limit"] = -1
        share["limits"], share["strategy"] = limits, strategy
    reasons += _fit_capacity(draft, largest)
    return draft, reasons


def _share_rows(queue: JobQueue, start: datetime, end: datetime) -> list[dict]:
    report = reports.usage_report(start, end, "share", reports.Scope(job_queue=queue.name))
    return [{**row, "key": row["quota_share"]} for row in report["rows"]]


def _strategy(strategy: str, row: dict | None) -> tuple[str, str]:
    """The strategy suggested and why (the strategy unchanged: no reason)."""
    if row is None:
        return strategy, ""
    entitled = row["entitled_instance_seconds"]
    idle = row["idle_while_waiting_instance_seconds"]
    beside = row["waited_beside_idle_instance_seconds"]
    if strategy == "RESERVE" and worth_a_look(idle, entitled):
        return "LEND", (
            f"it held {idle / 3600:,.1f} instance-hours idle while other shares' jobs waited; "
            "it takes them back by preemption when its own jobs come"
        )
    if strategy == "LEND" and worth_a_look(beside, entitled):
        return "LEND_AND_BORROW", (
            f"its jobs waited while {beside / 3600:,.1f} instance-hours sat idle in other shares"
        )
    return strategy, ""


def _busy_use(
    queue: JobQueue, start: datetime, end: datetime, largest: dict[tuple, int]
) -> dict[str, dict[str, int]]:
    """Share -> unit -> instances in use in its busiest hours (BUSY_QUANTILE of the hours)."""
    hours = max(1, int((end - start) / timedelta(hours=1)))
    per_hour: dict[tuple[str, str], list[float]] = defaultdict(list)
    for share, unit, seconds in (
        UsageHour.objects.filter(span=HOUR, job_queue=queue.name, hour__gte=start, hour__lt=end)
        .values_list("quota_share", "unit", "hour")
        .annotate(used=Sum("instance_seconds"))
        .values_list("quota_share", "unit", "used")
        .order_by()
    ):
        per_hour[(share, unit)].append(seconds / 3600)
    busy: dict[str, dict[str, int]] = defaultdict(dict)
    for (share, unit), values in per_hour.items():
        values = sorted(values + [0.0] * max(0, hours - len(values)))
        level = values[min(len(values) - 1, int(BUSY_QUANTILE * len(values)))]
        if level > 0:
            # Never below its largest job: a limit it could not start in would strand it.
            busy[share][unit] = max(math.ceil(level - 1e-9), largest.get((share, unit), 1))
    return busy


def _largest_jobs(queue: JobQueue, start: datetime, end: datetime) -> dict[tuple, int]:
    """(share, unit) -> the most instances one of its jobs submitted in the period asked for."""
    return {
        (share, unit): most
        for share, unit, most in Job.objects.filter(
            job_queue=queue, created_at__gte=start, created_at__lt=end
        )
        .values_list("share_name", "capacity_unit__name")
        .annotate(most=Max("quantity"))
        .order_by()
    }


def _fit_capacity(draft: dict, largest: dict[tuple, int]) -> list[str]:
    """Scale a unit's limits down in proportion where they add up to more than capacity
    (never below a share's largest job)."""
    notes = []
    for unit, capacity in draft["capacity"].items():
        shares = [s for s in draft["shares"] if s["limits"].get(unit)]
        total = sum(s["limits"][unit] for s in shares)
        if total <= capacity or not shares:
            continue
        for share in shares:
            scaled = math.floor(share["limits"][unit] * capacity / total)
            share["limits"][unit] = max(scaled, largest.get((share["name"], unit), 1))
        notes.append(f"{unit}: the limits came to {total}, scaled to the capacity of {capacity}")
    return notes


def _limits_text(limits: dict) -> str:
    return ", ".join(f"{n} {unit}" for unit, n in sorted(limits.items())) or "none"


def suggest(actor, queue: JobQueue, start: datetime, end: datetime):
    """Open the suggestion as a what-if replaying the jobs submitted since `start`."""
    draft, reasons = suggested_draft(queue, start, end)
    since_hours = max(1, math.ceil((end - start) / timedelta(hours=1)))
    since_hours = min(since_hours, whatif.MAX_HISTORY_HOURS)
    return whatif.start_what_if(actor, queue, draft, "history", since_hours, reasons)


def share_strategies(queue_names) -> dict[tuple[str, str], str]:
    return {
        (q, s): strategy
        for q, s, strategy in QuotaShare.objects.filter(
            job_queue__name__in=queue_names
        ).values_list("job_queue__name", "name", "sharing_strategy")
    }
