"""quotaportal's scheduler: AWS Batch quota-share semantics as a pure, deterministic function.

Standard library only. The control plane maps database rows to these dataclasses, calls
`plan_tick`, checks the plan with `check_plan`, and applies it.
"""

from __future__ import annotations

from scheduler.invariants import InvariantViolation, check_plan
from scheduler.model import (
    UNLIMITED_BORROW,
    Dispatch,
    Job,
    Ordering,
    Pending,
    PendingReason,
    Plan,
    Preemption,
    PreemptionKind,
    Share,
    Snapshot,
    Strategy,
)
from scheduler.planner import plan_tick
from scheduler.validation import share_config_errors, submission_error

__all__ = [
    "UNLIMITED_BORROW",
    "Dispatch",
    "InvariantViolation",
    "Job",
    "Ordering",
    "Pending",
    "PendingReason",
    "Plan",
    "Preemption",
    "PreemptionKind",
    "Share",
    "Snapshot",
    "Strategy",
    "check_plan",
    "plan_tick",
    "share_config_errors",
    "submission_error",
]
