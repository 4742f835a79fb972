"""quotaportal's domain models (DESIGN.md §2). Writes go through quotas.services only."""

from __future__ import annotations

from quotaportal.quotas.models.audit import (
    TICK_BUCKETS,
    TICK_SKIPPED,
    Event,
    EventKind,
    SchedulerRun,
    TickStat,
    UtilizationSample,
)
from quotaportal.quotas.models.jobs import (
    ACTIVE,
    DISPATCHED,
    FINAL,
    Job,
    JobAttempt,
    JobStatus,
    PendingReason,
)
from quotaportal.quotas.models.resources import (
    Backend,
    CapacityUnit,
    EnvironmentCapacity,
    JobQueue,
    Membership,
    Ordering,
    QuotaShare,
    Reservation,
    SchedulingPolicy,
    ServiceEnvironment,
    ShareCapacityLimit,
    State,
    Strategy,
    Team,
)
from quotaportal.quotas.models.whatif import WhatIf, WhatIfSource, WhatIfStatus

__all__ = [
    "TICK_BUCKETS",
    "TICK_SKIPPED",
    "TickStat",
    "ACTIVE",
    "DISPATCHED",
    "FINAL",
    "Backend",
    "CapacityUnit",
    "EnvironmentCapacity",
    "Event",
    "EventKind",
    "Job",
    "JobAttempt",
    "JobQueue",
    "JobStatus",
    "Membership",
    "Ordering",
    "PendingReason",
    "QuotaShare",
    "Reservation",
    "SchedulerRun",
    "SchedulingPolicy",
    "ServiceEnvironment",
    "ShareCapacityLimit",
    "State",
    "Strategy",
    "Team",
    "UtilizationSample",
    "WhatIf",
    "WhatIfSource",
    "WhatIfStatus",
]
