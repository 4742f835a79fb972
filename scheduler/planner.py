"""plan_tick: the quota-share scheduling algorithm of docs/concepts.md (The scheduler), as a
pure function.

One tick runs three steps in a fixed order (after step 0, which only acts when capacity was
taken away under running jobs, e.g. a reservation ended: it preempts until usage fits,
borrowed capacity first, then the jobs of the shares furthest over their limits):

1. Within quota: heads that keep their share within its limit start, lowest usage ratio first,
   reclaiming lent capacity from borrowing shares when free capacity does not cover them.
2. In-share preemption: a blocked head of a share with in_share_preemption preempts strictly
   lower-priority jobs of its own share when that lets it start.
3. Borrowing: remaining heads take lendable capacity within their share's ceiling, oldest job
   first across shares (the FIFO idle-resource-assignment strategy). Borrowing never preempts.

Every iteration order is fixed by explicit keys, so the same snapshot gives the same plan
whatever order its jobs and shares arrive in. Victims are only jobs that were already
dispatched before the tick, and a job preempted in a tick does not start again in that tick.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from operator import neg

from scheduler.ledger import Ledger
from scheduler.model import (
    Dispatch,
    Job,
    Plan,
    Preemption,
    PreemptionKind,
    Share,
    Snapshot,
    job_field,
    runnable_and_dispatched,
)
from scheduler.pending import Explanation
from scheduler.queues import ShareQueue
from scheduler.victims import VictimPool


def plan_tick(
    snapshot: Snapshot, now: float, *, explain: bool = True, positions: bool = True
) -> Plan:
    """Decide which jobs start and which are preempted in one tick of one job queue.

    With explain=False the plan carries no pending reasons or share ranking: the simulator
    replays hundreds of thousands of ticks and only needs the decisions. With positions=False
    the reasons carry no positions (all 0): the service tick stores reasons only, and pages
    number the jobs they show on read.
    """
    return _Tick(snapshot, now).run(explain, positions)


_id, _share, _priority, _created = map(job_field, ("id", "share", "priority", "created_at"))


def _group_runnable(runnable: list[Job], shares: dict[str, Share]) -> dict[str, list]:
    """RUNNABLE entries of the shares that have some, in share-name order (each share's
    entries unsorted: its ShareQueue orders them as far as the plan reads them)."""
    grouped: dict[str, list] = defaultdict(list)
    # (-priority, created_at, id, job), built at C speed: this runs for every RUNNABLE job.
    entries = zip(
        map(neg, map(_priority, runnable)),
        map(_created, runnable),
        map(_id, runnable),
        runnable,
        strict=True,
    )
    for share, entry in zip(map(_share, runnable), entries, strict=True):
        grouped[share].append(entry)
    unknown = sorted(set(grouped) - set(shares))
    if unknown:
        job = grouped[unknown[0]][0][3]
        raise ValueError(f"job {job.id} names unknown share {job.share!r}")
    return {name: grouped[name] for name in sorted(grouped)}


class _Tick:
    def __init__(self, snapshot: Snapshot, now: float):
        self.now = now
        self.ordering = snapshot.ordering
        self.shares = {share.name: share for share in sorted(snapshot.shares, key=_share_name)}
        runnable, dispatched = runnable_and_dispatched(snapshot.jobs)
        # A unit the queue must fit into (step 0) offers no more than that target for the rest
        # of the tick either, so no later step starts a job on what step 0 just took back.
        capacity = {
            unit: min(count, snapshot.fit_to.get(unit, count))
            for unit, count in snapshot.capacity.items()
        }
        self.ledger = Ledger(capacity, self.shares, dispatched)
        self.victims = VictimPool(dispatched)
        # Only shares with RUNNABLE jobs get a queue (most of a large fleet's shares have none
        # waiting); a share whose job is preempted this tick gets one then (_queue_of).
        self.more_waiting = snapshot.more_waiting
        self.queues = {
            name: ShareQueue(self.shares[name], self.ordering, entries, name in self.more_waiting)
            for name, entries in _group_runnable(runnable, self.shares).items()
        }
        self.dispatches: list[Dispatch] = []
        self.evictions: list[Preemption] = []
        self.preempted: dict[str, list[Job]] = defaultdict(list)
        self.fit_to = snapshot.fit_to
        self.victim_shares: set[str] = set()  # shares that lost jobs since step 1 last looked
        self.beyond = snapshot.beyond
        self.standing = snapshot.fair_standing
        for job in self.beyond:
            if job.share not in self.shares:
                raise ValueError(f"job {job.id} names unknown share {job.share!r}")
            self._queue_of(job.share)

    def run(self, explain: bool = True, positions: bool = True) -> Plan:
        self.fit_capacity()
        self.start_within_quota()
        self.preempt_within_shares()
        self.borrow_idle_capacity()
        evictions = tuple(self.evictions)
        short_of = tuple(sorted(name for name, queue in self.queues.items() if queue.exhausted))
        if not explain:
            return Plan(self.now, tuple(self.dispatches), evictions=evictions, short_of=short_of)
        pending = Explanation(
            self.queues, self.preempted, self.ledger, self.ordering, positions, self.beyond
        )
        return Plan(self.now, tuple(self.dispatches), pending, evictions, short_of)

    # -- step 0 ---------------------------------------------------------------------------

    def fit_capacity(self) -> None:
        """Capacity taken away under running jobs: preempt until each such unit fits."""
        for unit in sorted(self.fit_to):
            excess = self.ledger.total.get(unit, 0) - self.fit_to[unit]
            if excess <= 0:
                continue
            for victim in self.victims.to_fit(self.ledger, unit, excess):
                self._preempt(victim)
                self.evictions.append(Preemption(victim.id, PreemptionKind.CAPACITY, ""))
                self._queue_of(victim.share).note_victim(victim)

    # -- step 1 ---------------------------------------------------------------------------

    def start_within_quota(self) -> None:
        heap = [entry for queue in self.queues.values() if (entry := self._quota_entry(queue))]
        heapq.heapify(heap)
        while heap:
            entry = heapq.heappop(heap)
            queue = self.queues[entry[3]]
            job = queue.candidate
            # A preemption elsewhere may have changed this share's candidate since it was queued.
            if job is not None and job.id == entry[4] and not self._start_within_quota(queue, job):
                queue.give_up_on_candidate()
            # A share that lost a job straddling its limit may now be within it.
            for touched in (queue, *map(self._queue_of, self._drain_victim_shares())):
                if entry := self._quota_entry(touched):
                    heapq.heappush(heap, entry)

    def _drain_victim_shares(self) -> list[str]:
        names = sorted(self.victim_shares)
        self.victim_shares.clear()
        return names

    def _quota_entry(self, queue: ShareQueue) -> tuple | None:
        """Heap key for a share whose candidate stays within quota: lowest usage ratio first."""
        job = queue.candidate
        if job is None or not self.ledger.within_quota(queue.share, job):
            return None
        share = queue.share
        ratio = self.ledger.used(share, job.unit) / share.limit(job.unit)
        return (ratio, -job.priority, job.created_at, share.name, job.id)

    def _start_within_quota(self, queue: ShareQueue, job: Job) -> bool:
        share = queue.share
        shortfall = job.quantity - self.ledger.available_to(share, job.unit)
        if shortfall <= 0:
            self._dispatch(queue, job)
            return True
        if not queue.may_preempt:
            return False
        victims = self.victims.reclaimable(self.ledger, share, job.unit, shortfall, self.standing)
        if victims is None:
            return False
        self._dispatch(queue, job, victims, PreemptionKind.CROSS_SHARE)
        return True

    # -- step 2 ---------------------------------------------------------------------------

    def preempt_within_shares(self) -> None:
        for queue in list(self.queues.values()):
            if queue.share.in_share_preemption:
                while self._preempt_for_head(queue):
                    pass

    def _preempt_for_head(self, queue: ShareQueue) -> bool:
        job = queue.head
        if job is None or queue.victim_leads or self.ledger.fits(queue.share, job):
            return False
        victims = self.victims.in_share(self.ledger, queue.share, job)
        if victims is None:
            return False
        queue.blocked = False
        self._dispatch(queue, job, victims, PreemptionKind.IN_SHARE)
        return True

    # -- step 3 ---------------------------------------------------------------------------

    def borrow_idle_capacity(self) -> None:
        heap = [entry for queue in self.queues.values() if (entry := self._borrow_entry(queue))]
        heapq.heapify(heap)
        while heap:
            queue = self.queues[heapq.heappop(heap)[-1]]
            job = queue.candidate
            if self.ledger.fits(queue.share, job):
                self._dispatch(queue, job)
            else:
                queue.give_up_on_candidate()
            if entry := self._borrow_entry(queue):
                heapq.heappush(heap, entry)

    def _borrow_entry(self, queue: ShareQueue) -> tuple | None:
        """Heap key (oldest first) for the share's first candidate that fits right now.

        Capacity only shrinks during this step, so a candidate that does not fit now never
        will this tick: STRICT blocks the share, BEST_EFFORT looks further down the share.
        """
        while (job := queue.candidate) is not None:
            if self.ledger.fits(queue.share, job):
                name = queue.share.name
                if self.standing is not None:  # fair share: the least past borrowing first
                    return (self.standing.get(name, 0.0), job.created_at, job.id, name)
                return (job.created_at, job.id, name)
            queue.give_up_on_candidate()
        return None

    # -- applying decisions -----------------------------------------------------------------

    def _dispatch(
        self,
        queue: ShareQueue,
        job: Job,
        victims: list[Job] = (),
        kind: PreemptionKind | None = None,
    ) -> None:
        preemptions = []
        for victim in victims:
            self._preempt(victim)
            preemptions.append(Preemption(victim.id, kind, job.id))
        share = queue.share
        self.ledger.add(job, share)
        queue.take(job)
        for victim in victims:
            self._queue_of(victim.share).note_victim(victim)
            self.victim_shares.add(victim.share)
        borrowing = self.ledger.is_borrowing(share, job.unit)
        self.dispatches.append(Dispatch(job.id, borrowing, tuple(preemptions)))

    def _preempt(self, victim: Job) -> None:
        self.ledger.preempt(victim, self.shares[victim.share])
        self.victims.discard(victim)
        self.preempted[victim.share].append(victim)

    def _queue_of(self, name: str) -> ShareQueue:
        if name not in self.queues:
            more = name in self.more_waiting
            self.queues[name] = ShareQueue(self.shares[name], self.ordering, [], more)
        return self.queues[name]


def _share_name(share: Share) -> str:
    return share.name
