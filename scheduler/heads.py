"""Planning from the heads of each share's line: a tick that costs what it can change.

A tick can only start jobs at the front of each share's line (in share order: priority
descending, then age, then id), and only jobs already dispatched can be preempted. So a narrow
snapshot holds every dispatched job (bounded by the capacity) and the first `window` RUNNABLE
jobs of each share, and says which shares have more waiting behind them. The planner marks a
share whose held jobs it ran out of (`Plan.short_of`): that plan depends on jobs it was not
given, so the share's window grows and the tick plans again. A plan that ran out of nothing
made exactly the decisions the full snapshot would have made: every choice the planner makes
reads a share's line from the front, and it stopped reading each line before its end.

Pending reasons follow under STRICT ordering, where every job behind a share's head waits
BEHIND_SHARE_HEAD (or NO_CAPACITY_LIMIT_FOR_UNIT, which depends on the share's limits alone):
the caller passes the jobs whose stored reason may be wrong now (never explained, or explained
as a head) as `Snapshot.beyond`, and the plan explains them too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from scheduler.model import Plan, Snapshot, runnable_and_dispatched
from scheduler.planner import plan_tick
from scheduler.queues import order_key

FIRST_WINDOW = 8  # a share's first read; most ticks start no more than that from one share
GROWTH = 4  # a share the plan ran short of is read this many times further


class Windows(defaultdict):
    """How many RUNNABLE jobs of each share's line to read: share name -> count."""

    def __init__(self, first: int = FIRST_WINDOW):
        if first < 1:
            raise ValueError("a window holds at least one job")
        super().__init__(lambda: first)

    def widen(self, names) -> None:
        for name in names:
            self[name] *= GROWTH


@dataclass(frozen=True)
class Planned:
    snapshot: Snapshot  # the last, widest snapshot read
    plan: Plan
    reads: int  # snapshots read: 1 when the first windows sufficed


def plan_from_heads(
    read: Callable[[Windows], Snapshot],
    now: float,
    *,
    first: int = FIRST_WINDOW,
    explain: bool = True,
) -> Planned:
    """Plan from `read(windows)`, widening the windows of the shares the plan ran short of
    until it runs short of none. Ends: a share reads its whole line at last, and a share
    whose whole line is held is never short."""
    windows = Windows(first)
    reads = 0
    while True:
        snapshot = read(windows)
        reads += 1
        plan = plan_tick(snapshot, now, explain=explain, positions=False)
        if not plan.short_of:
            return Planned(snapshot, plan, reads)
        windows.widen(plan.short_of)


def narrowed(snapshot: Snapshot, windows: Mapping[str, int], explain: set[str] = frozenset()):
    """What a narrow read of a full snapshot gives: every dispatched job, the first
    `windows[share]` RUNNABLE jobs of each share, and of the rest those in `explain` (as
    `beyond`). Tests compare plans of both; the control plane reads the same from its tables."""
    runnable, dispatched = runnable_and_dispatched(snapshot.jobs)
    lines = defaultdict(list)
    for job in runnable:
        lines[job.share].append(job)
    held, beyond, more = list(dispatched), [], set()
    for name, line in lines.items():
        line.sort(key=order_key)
        window = windows[name]
        held.extend(line[:window])
        if len(line) > window:
            more.add(name)
            beyond.extend(job for job in line[window:] if job.id in explain)
    return replace(snapshot, jobs=tuple(held), more_waiting=frozenset(more), beyond=tuple(beyond))
