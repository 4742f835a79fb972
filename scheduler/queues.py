"""A quota share's RUNNABLE jobs in share order, and the cursor the planner walks them with.

Share order is scheduling priority descending, then created_at ascending, then id, so a
preempted job (which keeps its created_at) returns to its place.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from scheduler.model import Job, Ordering, Share

OrderKey = tuple[int, float, str]


def order_key(job: Job) -> OrderKey:
    return (-job.priority, job.created_at, job.id)


class Line:
    """A share's RUNNABLE entries, sorted only as far as they are read.

    A tick reads a few heads of each share's line; sorting every line in full cost as much as
    the rest of the plan. The entries are heapified (linear) and popped in order on demand;
    `every()` sorts the rest when the whole line is wanted (explaining every waiting job).
    """

    __slots__ = ("_heap", "_sorted")

    def __init__(self, entries: list[tuple]):
        heapq.heapify(entries)
        self._heap = entries
        self._sorted: list[tuple] = []

    def __len__(self) -> int:
        return len(self._sorted) + len(self._heap)

    def __getitem__(self, index: int) -> tuple:
        ordered, heap = self._sorted, self._heap
        while len(ordered) <= index and heap:
            ordered.append(heapq.heappop(heap))
        return ordered[index]

    def every(self) -> list[tuple]:
        if self._heap:
            self._heap.sort()
            self._sorted.extend(self._heap)
            self._heap = []
        return self._sorted


class ShareQueue:
    """The runnable jobs of one share during one tick.

    `head` is the first job the share would start: the first one not taken this tick, skipping
    jobs that can never start in the share (a unit it has no limit for, or more instances than
    its limit plus borrow ceiling: limits can be lowered after a job is submitted), so they
    block nobody.
    With STRICT ordering the planner only ever looks at the head. With BEST_EFFORT, once the
    head cannot start, `cursor` walks past it to later jobs that may start without preempting.

    A narrow snapshot holds only the first jobs of a long line (`more_beyond`: more wait
    behind them). Should the walk reach the end of what it holds, the plan would depend on
    jobs it was not given: `exhausted` says so, and the caller widens the line and plans again.
    """

    __slots__ = (
        "share",
        "ordering",
        "entries",
        "taken",
        "head_index",
        "cursor",
        "blocked",
        "skipping",
        "victim_leads",
        "more_beyond",
        "exhausted",
    )

    def __init__(
        self, share: Share, ordering: Ordering, entries: list[tuple], more_beyond: bool = False
    ):
        self.share = share
        self.ordering = ordering
        self.entries = Line(entries)  # (-priority, created_at, id, job) tuples, in that order
        self.more_beyond = more_beyond
        self.exhausted = False
        self.taken: set[str] = set()
        self.blocked = False  # STRICT: nothing more starts from this share this tick
        self.skipping = False  # BEST_EFFORT: the head could not start, later jobs may
        # A job preempted this tick that now leads the share: it cannot start again this tick,
        # so a STRICT share waits and a BEST_EFFORT share starts only what fits without preempting.
        self.victim_leads = False
        self.head_index = 0
        self.cursor = 0
        self._settle()

    def _startable(self, index: int) -> bool:
        job = self.entries[index][3]
        return job.id not in self.taken and self.share.could_ever_hold(job)

    def _settle(self) -> None:
        entries = self.entries
        while self.head_index < len(entries) and not self._startable(self.head_index):
            self.head_index += 1
        self.cursor = max(self.cursor, self.head_index)
        while self.cursor < len(entries) and not self._startable(self.cursor):
            self.cursor += 1
        if self.more_beyond and (
            self.head_index >= len(entries) or self.skipping and self.cursor >= len(entries)
        ):
            self.exhausted = True

    @property
    def head(self) -> Job | None:
        return self.entries[self.head_index][3] if self.head_index < len(self.entries) else None

    @property
    def candidate(self) -> Job | None:
        """The next job the planner should try: the head, or past it when skipping."""
        if self.blocked or (self.victim_leads and self.ordering is Ordering.STRICT):
            return None
        index = self.cursor if self.skipping else self.head_index
        return self.entries[index][3] if index < len(self.entries) else None

    @property
    def may_preempt(self) -> bool:
        """Only the share's real head may preempt; jobs started past it must simply fit."""
        return not self.skipping and not self.victim_leads

    def note_victim(self, victim: Job) -> None:
        """A job of this share was preempted this tick; it leads the share if it comes first.
        A victim the share can never hold again (its limit was lowered) leads nobody."""
        if not self.share.could_ever_hold(victim):
            return
        head = self.head
        if head is None or order_key(victim) < order_key(head):
            self.victim_leads = True

    def take(self, job: Job) -> None:
        self.taken.add(job.id)
        self._settle()

    def give_up_on_candidate(self) -> None:
        """The candidate cannot start: STRICT blocks the share, BEST_EFFORT moves past it."""
        if self.ordering is Ordering.STRICT:
            self.blocked = True
            return
        if self.skipping:
            self.cursor += 1
        else:
            self.skipping = True
            self.cursor = self.head_index + 1
        self._settle()

    def remaining(self) -> Iterator[Job]:
        taken = self.taken
        for entry in self.entries.every():
            if entry[3].id not in taken:
                yield entry[3]
