"""A deterministic discrete-event simulation of one job queue through `plan_tick`.

Time jumps from event to event: an arrival, a completion, the end of a preemption grace period
(when a preemptor's process really starts), a priority change, a capacity change. All events of
one instant are applied, then the queue ticks once; a tick that preempted is followed by another
at the same instant (its victims could not start again in it). With `tick_s` the queue instead
ticks on a fixed grid like the live system: events wait for the next tick, and, as on a
SIMULATED environment, a job dispatched in one tick runs from the next and ends at the first
tick at or after its start plus its duration.

Two things keep 100,000 jobs over 1,000 shares fast, and neither changes a decision (the tests
replay random workloads both ways and compare every job's start and end):

- A tick is skipped when it cannot start anything: no job waits, or since the last tick (which
  preempted nothing) only jobs arrived that cannot lead their share (STRICT ordering). A tick
  that preempted nothing leaves every waiting job blocked; a job that arrives behind them is
  blocked too.
- The snapshot holds, per share, unit and job size, only the first capacity//size + 1 waiting
  jobs in share order (no tick can start more of them), and only the shares that have jobs in
  it or reserve idle capacity: other shares change no decision.
"""

from __future__ import annotations

import bisect
import heapq
import time
from collections import Counter, defaultdict
from collections.abc import Callable

from scheduler.fairshare import Decayed
from scheduler.model import Job, Ordering
from scheduler.simulate.engine_measures import Measuring
from scheduler.simulate.engine_runs import Dispatching
from scheduler.simulate.engine_state import (
    ARRIVAL,
    CAPACITY,
    END,
    FOLDED_LEND,
    FOLDED_RESERVE,
    PRIORITY,
    SAME_INSTANT_RETICKS,
    START,
    JobOutcome,
    QueueRun,
    Running,
)
from scheduler.simulate.engine_ticks import Ticking
from scheduler.simulate.workload import QueueWorkload, WorkJob


class QueueSimulation(Ticking, Dispatching, Measuring):
    def __init__(
        self,
        queue: QueueWorkload,
        *,
        tick_s: float | None = None,
        check: bool = True,
        verify_skips: bool = False,
        fast: bool = True,
        running: list[Running] = (),
        start_s: float | None = None,
        until_all_started: bool = False,
        max_instants: int | None = None,
        observer: Callable[[QueueSimulation], None] | None = None,
        progress: Callable[[int, int], None] | None = None,
        sample_every_s: float | None = None,
    ):
        config = queue.config
        self.config = config
        self.tick_s = tick_s
        self.check = check
        self.verify_skips = verify_skips
        self.fast = fast
        self.progress = progress
        self.observer = observer
        self.sample_every_s = sample_every_s
        # Estimates stop once every job has started (what happens after is not asked).
        self.until_all_started = until_all_started
        self.max_instants = max_instants
        self.shares = {s.name: s for s in config.shares}
        self._head_terms: dict[tuple[str, str], tuple[int, float, bool, bool]] = {}
        if {FOLDED_LEND, FOLDED_RESERVE} & set(self.shares):
            raise ValueError("share names starting with '~idle' are the simulator's own")
        self.capacity = dict(config.capacity)
        self.fair_policy = config.fair_share
        self.fair_used: dict[tuple[str, str], Decayed] = {}  # (share, unit) -> decayed use
        self.standing: dict[str, float] | None = None  # each share's, as of the last tick
        self._init_use()
        self._init_jobs()
        self.run = QueueRun(
            config.name,
            self.outcomes,
            config.shares,
            [],
            defaultdict(float),
            defaultdict(float),
            0.0,
            defaultdict(int),
            fair_share=config.fair_share,
        )
        self.jobs_total = len(queue.jobs) + len(running)
        self.jobs_done = 0
        self.unstarted = len(queue.jobs)
        submits = [j.submit_s for j in queue.jobs]
        self.now = min(submits, default=0.0) if start_s is None else start_s
        self.run.first_submit_s = self.next_sample_s = self.now
        self._schedule(queue, running)

    def _init_use(self) -> None:
        """Who uses what: per share and unit, and the totals a folded snapshot needs."""
        self.usage: dict[tuple[str, str], int] = defaultdict(int)
        self.total: dict[str, int] = defaultdict(int)
        self._since: dict[tuple[str, str], float] = {}  # when each usage last changed
        self.by_share: dict[str, dict[str, Job]] = defaultdict(dict)
        # Kept up to date by _use so a snapshot folds idle shares without walking them all.
        self.borrowing: dict[str, set[str]] = {}  # share -> units it uses above its limit
        self.borrowers_on: dict[str, set[str]] = defaultdict(set)  # unit -> those shares
        # (share, unit) -> priority -> dispatched jobs: may an in-share head preempt anyone?
        self.priorities: dict[tuple[str, str], Counter] = defaultdict(Counter)
        self.reserving = [s for s in self.config.shares if s.reserves_idle]
        self.reserving_names = {s.name for s in self.reserving}
        self.reserve_limits_total: dict[str, int] = defaultdict(int)
        for share in self.reserving:
            for unit, limit in share.limits.items():
                self.reserve_limits_total[unit] += limit
        self.reserve_used_total: dict[str, int] = defaultdict(int)
        self.lend_used_total: dict[str, int] = defaultdict(int)

    def _init_jobs(self) -> None:
        """The jobs' states, the waiting ones indexed for short snapshots, and the events."""
        self.events: list[tuple] = []
        self.seq = 0
        self.outcomes: dict[str, JobOutcome] = {}
        self.work: dict[str, WorkJob] = {}
        self.runnable: dict[str, Job] = {}
        self.dispatched: dict[str, Job] = {}
        self.unlaunched: set[str] = set()  # fixed tick: dispatched, running from the next tick
        self.attempt: dict[str, int] = {}  # bumps on preemption so stale END events are ignored
        self.classes: dict[tuple, list] = defaultdict(list)  # (share, unit, qty) -> sorted keys
        self.share_classes: dict[str, set] = defaultdict(set)
        # unit -> share -> its waiting jobs on the unit (which shares a touched unit concerns)
        self.waiting_shares: dict[str, dict[str, int]] = defaultdict(dict)
        # Each share's first waiting job (its head), and per unit the shares heading there:
        # a tick looks only at the heads on the units that changed.
        self.heads: dict[str, tuple] = {}  # share -> its head's order key
        self.heads_on: dict[str, dict[str, Job]] = defaultdict(dict)  # unit -> share -> head
        self.runnable_units: dict[str, str] = {}  # share -> the unit its head is on
        # Shares whose head may start with less free capacity than it needs: by preempting a
        # lower-priority job of their own (a RESERVE share's own idle capacity is the other
        # way, see reserving_names).
        self.in_share_names = {s.name for s in self.config.shares if s.in_share_preemption}
        self.dirty = False
        self.preempted_last_tick = False
        # Units whose capacity freed or that gained a leading job since the last tick; None
        # when something else changed (priorities, capacity) and the next tick plans it all.
        self.touched: set[str] | None = set()

    def _schedule(self, queue: QueueWorkload, running: list[Running]) -> None:
        for at, change in self.config.capacity_changes:
            self._push(at, CAPACITY, dict(change))
        for job in queue.jobs:
            # A forward simulation starts with jobs submitted before it: they arrive at once
            # and keep their place in their share (created_at is the real submit time).
            self._push(max(job.submit_s, self.now), ARRIVAL, job)
            for at, priority in job.priority_changes:
                self._push(max(at, job.submit_s, self.now), PRIORITY, (job.id, priority))
        for item in running:
            self._start_running(item)

    # -- the event loop ----------------------------------------------------------------------

    def simulate(self) -> QueueRun:
        began = time.perf_counter()
        if self.tick_s:
            self._run_fixed_ticks()
        else:
            self._run_events()
        for key in list(self._since):
            self._settle(key)
        self.run.wall_s = time.perf_counter() - began
        return self.run

    def _run_events(self) -> None:
        while self.events:
            at = self.events[0][0]
            self._advance_to(at)
            while self.events and self.events[0][0] == at:
                self._apply(heapq.heappop(self.events))
            self.run.instants += 1
            for _ in range(SAME_INSTANT_RETICKS):
                self._tick_if_needed()
                if not self.preempted_last_tick:
                    break
            self._report_progress()
            if self.observer:
                self.observer(self)
            if self._should_stop():
                break

    def _run_fixed_ticks(self) -> None:
        step = self.tick_s
        now = self.now
        while self.events or self.dirty or self.unlaunched or self.preempted_last_tick:
            idle = not (self.dirty or self.unlaunched or self.preempted_last_tick)
            if idle and self.events[0][0] > now:
                # Nothing can happen before the next event: jump to the first tick after it.
                skipped = int((self.events[0][0] - now) // step)
                now += skipped * step
                if self.events[0][0] > now:
                    now += step
            self._advance_to(now)
            self._launch_unlaunched()
            while self.events and self.events[0][0] <= now:
                self._apply(heapq.heappop(self.events))
            self.run.instants += 1
            self._tick_if_needed()
            self._report_progress()
            if self._should_stop():
                break
            now += step

    def _should_stop(self) -> bool:
        if self.max_instants is not None and self.run.instants >= self.max_instants:
            return True
        return self.until_all_started and not self.unstarted

    def _advance_to(self, at: float) -> None:
        self._account(at)
        self.now = at

    def _report_progress(self) -> None:
        if self.progress and self.run.instants % 2000 == 0:
            self.progress(self.jobs_done, self.jobs_total)

    # -- events --------------------------------------------------------------------------------

    def _push(self, at: float, kind: int, data) -> None:
        self.seq += 1
        heapq.heappush(self.events, (at, kind, self.seq, data))

    def _apply(self, event: tuple) -> None:
        _, kind, _, data = event
        if kind == ARRIVAL:
            self._arrive(data)
        elif kind == END:
            job_id, attempt = data
            if self.attempt.get(job_id) == attempt and job_id in self.dispatched:
                self._end(job_id)
        elif kind == START:
            job_id, attempt = data
            if self.attempt.get(job_id) == attempt and job_id in self.dispatched:
                self._begin_run(job_id)
        elif kind == PRIORITY:
            self._change_priority(*data)
        elif kind == CAPACITY:
            self.capacity.update(data)
            self.dirty = True
            self.touched = None

    def _arrive(self, work: WorkJob) -> None:
        self.work[work.id] = work
        self.outcomes[work.id] = JobOutcome(work)
        self.attempt[work.id] = 0
        job = Job(work.id, work.share, work.unit, work.quantity, work.priority, work.submit_s)
        if self.shares[work.share].could_ever_hold(job):
            if self._may_lead(job):
                self.dirty = True
                self._touch(job.unit)
            self._enqueue(job)

    def _may_lead(self, job: Job) -> bool:
        """Could the job be its share's next to start (STRICT looks at nothing else)?"""
        if self.config.ordering is Ordering.BEST_EFFORT or not self.fast:
            return True
        head = self.heads.get(job.share)
        return head is None or (-job.priority, job.created_at, job.id) < head

    def _enqueue(self, job: Job) -> None:
        self.runnable[job.id] = job
        class_key = (job.share, job.unit, job.quantity)
        bisect.insort(self.classes[class_key], (-job.priority, job.created_at, job.id))
        self.share_classes[job.share].add(class_key)
        key = (-job.priority, job.created_at, job.id)
        head = self.heads.get(job.share)
        if head is None or key < head:
            self._set_head(job.share, job)
        shares = self.waiting_shares[job.unit]
        shares[job.share] = shares.get(job.share, 0) + 1

    def _dequeue(self, job: Job) -> None:
        del self.runnable[job.id]
        keys = self.classes[(job.share, job.unit, job.quantity)]
        key = (-job.priority, job.created_at, job.id)
        del keys[bisect.bisect_left(keys, key)]
        if self.heads.get(job.share) == key:
            firsts = [keys[0] for c in self.share_classes[job.share] if (keys := self.classes[c])]
            self._set_head(job.share, self.runnable[min(firsts)[2]] if firsts else None)
        shares = self.waiting_shares[job.unit]
        shares[job.share] -= 1
        if not shares[job.share]:
            del shares[job.share]

    def _set_head(self, name: str, job: Job | None) -> None:
        old = self.heads.pop(name, None)
        if old is not None:
            del self.heads_on[self.runnable_units[name]][name]
        if job is not None:
            self.heads[name] = (-job.priority, job.created_at, job.id)
            self.heads_on[job.unit][name] = job
            self.runnable_units[name] = job.unit

    def _change_priority(self, job_id: str, priority: int) -> None:
        if job_id in self.runnable:
            job = self.runnable[job_id]
            self._dequeue(job)
            self._enqueue(job._replace(priority=priority))
            self.dirty = True
            self.touched = None
        elif job_id in self.dispatched:
            old = self.dispatched[job_id]
            job = old._replace(priority=priority)
            self._count_priority((job.share, job.unit), old.priority, -1)
            self._count_priority((job.share, job.unit), priority, +1)
            self.dispatched[job_id] = self.by_share[job.share][job_id] = job
            self.dirty = True  # it may now be a victim for a waiting job, or no longer one
            self.touched = None

    def _touch(self, unit: str) -> None:
        if self.touched is not None:
            self.touched.add(unit)

    def _touch_share(self, job: Job) -> None:
        """The job's unit moved and its share's head may have changed: touch the unit and
        every unit the share has jobs waiting on."""
        self._touch(job.unit)
        for _, unit, _ in (key for key in self.share_classes[job.share] if self.classes[key]):
            self._touch(unit)
