"""The one package that knows both worlds: database rows <-> scheduler dataclasses.

snapshot reads a job queue (its capacity, shares and active jobs) into a scheduler.Snapshot;
apply writes a Plan back through the jobs' transitions (quotaportal.jobs.transitions), so a
job that changed since the snapshot (terminated, finished) is skipped instead of corrupted.
"""

from quotaportal.tick.bridge.apply import apply_plan, changed_reasons, write_pending
from quotaportal.tick.bridge.capacity import (
    allowed_capacity,
    capacity_now,
    capacity_of,
    environment_limits,
    fit_targets,
    most_capacity,
    next_reservation_end,
    usable_capacity,
)
from quotaportal.tick.bridge.fronts import read_fronts, waiting_in_order
from quotaportal.tick.bridge.heads import heads_pay_off, plan_heads, reads_heads
from quotaportal.tick.bridge.snapshot import (
    ACTIVE_JOBS_SQL,
    Loaded,
    Terms,
    active_columns,
    load_snapshot,
    queue_terms,
    scheduler_share,
    share_limits,
    share_of,
    timestamp,
    usage_after,
)

__all__ = [
    "ACTIVE_JOBS_SQL",
    "Loaded",
    "Terms",
    "active_columns",
    "allowed_capacity",
    "apply_plan",
    "capacity_now",
    "capacity_of",
    "changed_reasons",
    "environment_limits",
    "fit_targets",
    "heads_pay_off",
    "load_snapshot",
    "most_capacity",
    "next_reservation_end",
    "plan_heads",
    "queue_terms",
    "read_fronts",
    "reads_heads",
    "scheduler_share",
    "share_limits",
    "share_of",
    "timestamp",
    "usable_capacity",
    "usage_after",
    "waiting_in_order",
    "write_pending",
]
