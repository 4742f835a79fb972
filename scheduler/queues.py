"""A quota share's RUNNABLE jobs in share order, and the cursor the planner walks them with.

Share order is scheduling priority descending, then created_at ascending, then id, so a
preempted job (which keeps its created_at) returns to its place.
"""

from __future__ import annotations

from collections.abc import Iterator

from scheduler.model import Job, Ordering, Share

OrderKey = tuple[int, float, str]


def order_key(job: Job) -> OrderKey:
    return (-job.priority, job.created_at, job.id)


class ShareQueue:
    """The runnable jobs of one share during one tick.

    `head` is the first job the share would start: the first one not taken this tick, skipping
    jobs that can never start in the share (a unit it has no limit for, or more instances than
    its limit plus borrow ceiling: limits can be lowered after a job is submitted), so they
    block nobody.
    With STRICT ordering the planner only ever looks at the head. With BEST_EFFORT, once the
    head cannot start, `cursor` walks past it to later jobs that may start without preempting.
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
    )

    def __init__(self, share: Share, ordering: Ordering, entries: list[tuple]):
        self.share = share
        self.ordering = ordering
        self.entries = entries  # sorted (-priority, created_at, id, job) tuples
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
        for entry in self.entries:
            if entry[3].id not in taken:
                yield entry[3]
