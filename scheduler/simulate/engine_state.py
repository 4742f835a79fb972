"""What the simulator's parts share: event kinds, the folded stand-in shares, and the
records of a run (a job's outcome, a running job, a queue's run)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.fairshare import Policy
from scheduler.model import Job, Share
from scheduler.simulate.workload import WorkJob

# Event kinds, in the order they apply within one instant.
CAPACITY, START, END, ARRIVAL, PRIORITY = range(5)
SAME_INSTANT_RETICKS = 20  # bounds a chain of preemptions at one instant
# How often a narrow plan may widen to what it turned out to need before every share is planned.
WIDENINGS = 4


FOLDED_RESERVE = "~idle reserving shares"
FOLDED_LEND = "~idle lending shares"


def _stand_in(share: str, unit: str, quantity: int) -> Job:
    return Job(f"{share}/{unit}", share, unit, quantity, 0, 0.0, 0.0)


class SkipWasWrong(AssertionError):
    """verify_skips found a skipped tick that would have started or preempted something."""


@dataclass
class JobOutcome:
    job: WorkJob
    start_s: float | None = None  # its first run's start
    end_s: float | None = None
    runs: int = 0
    preemptions: list[tuple[float, str]] = field(default_factory=list)  # (time, kind)
    dispatches: list[float] = field(default_factory=list)  # when each run got its capacity

    @property
    def wait_s(self) -> float | None:
        return None if self.start_s is None else self.start_s - self.job.submit_s


@dataclass
class Running:
    """A job that is running at time 0 of a forward simulation (estimates start from now)."""

    job: WorkJob
    dispatched_at_s: float
    remaining_s: float


@dataclass
class QueueRun:
    """Everything one queue's simulation measured."""

    name: str
    outcomes: dict[str, JobOutcome]
    shares: tuple[Share, ...]
    samples: list[tuple[float, dict[str, dict[str, int]], dict[str, int]]]  # t, used, capacity
    own_s: dict[str, float]  # instance-seconds within the share's limits
    borrowed_s: dict[str, float]  # instance-seconds above them
    idle_while_waiting_s: float  # free instance-seconds while a job that could use them waited
    preemptions: dict[str, int]
    ticks_planned: int = 0
    ticks_skipped: int = 0
    replans: int = 0  # ticks of the touched shares that had to be planned again in full
    instants: int = 0
    wall_s: float = 0.0
    first_submit_s: float = 0.0
    fair_share: Policy | None = None  # the policy it ran under
