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
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.invariants import check_plan
from scheduler.model import Job, Ordering, Plan, PreemptionKind, Share, Snapshot, Strategy
from scheduler.planner import plan_tick
from scheduler.simulate.workload import QueueWorkload, WorkJob

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


class QueueSimulation:
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

    # -- ticks ---------------------------------------------------------------------------------

    def _tick_if_needed(self) -> None:
        needed = bool((self.dirty or self.preempted_last_tick) and self.runnable)
        touched, self.touched = self.touched, set()
        if not needed and not (self.verify_skips and self.runnable):
            self.run.ticks_skipped += 1
            self.dirty = self.preempted_last_tick = False
            return
        if not needed:
            plan = plan_tick(self._snapshot(), self.now, explain=False)
            self.run.ticks_skipped += 1
            self.dirty = self.preempted_last_tick = False
            if plan.dispatches:
                raise SkipWasWrong(
                    f"a tick skipped at {self.now} would have started "
                    f"{list(plan.dispatched_ids)[:5]}"
                )
            return
        if self.fast and touched:
            snapshot, plan = self._plan_touched(touched)
        else:
            snapshot = self._snapshot()
            plan = plan_tick(snapshot, self.now, explain=False)
        if self.check:
            check_plan(snapshot, plan, positions=False, pending=False)
        self.run.ticks_planned += 1
        self.dirty = False
        self._apply_plan(plan)

    def _plan_touched(self, touched: set[str]) -> tuple[Snapshot, Plan]:
        """Plan only the shares with a job waiting on a unit that changed.

        Since the last tick only jobs ended, leading jobs arrived, jobs started or victims of
        the last tick's preemptions went back to waiting on `touched` units (whose shares'
        other units are touched too: their heads may have changed). Every other share's
        waiting jobs are on units whose ledger did not move, so they are as blocked as they
        were, and stay so unless the plan itself changes their unit. So the plan is widened
        until it needs nothing it was not given: a victim may free more than its preemptor
        needs (the rest may go to a head that did not fit before, or to the victim's own
        share, now further below its ceiling), and a share may go on to start a job on
        another unit (whose heads are then looked at too). After a few widenings, every share.
        """
        freed: dict[str, int] = {}
        also: set[str] = set()
        # Borrowers' jobs are left out (as mere use) until the plan shows a share that might
        # have taken capacity back from them: most ticks need no victims at all.
        with_victims = self.config.ordering is not Ordering.STRICT
        for _ in range(WIDENINGS):
            snapshot = self._snapshot(touched, freed, also, with_victims)
            plan = plan_tick(snapshot, self.now, explain=False)
            jobs = {job.id: job for job in snapshot.jobs}
            if not with_victims and self._may_reclaim_after(jobs, plan):
                with_victims = True
                continue
            victims = [jobs[p.job_id] for p in plan.preemptions]
            needs: dict[str, int] = defaultdict(int)
            for victim in victims:
                needs[victim.unit] += victim.quantity
            elsewhere = {jobs[d.job_id].unit for d in plan.dispatches} - touched
            victim_shares = {victim.share for victim in victims}
            if (
                not elsewhere
                and victim_shares <= also
                and all(n <= freed.get(unit, 0) for unit, n in needs.items())
            ):
                break
            freed = {u: max(needs.get(u, 0), freed.get(u, 0)) for u in {*needs, *freed}}
            also |= victim_shares
            touched = touched | elsewhere
        else:
            self.run.replans += 1
            snapshot = self._snapshot()
            return snapshot, plan_tick(snapshot, self.now, explain=False)
        if self.verify_skips:
            full = plan_tick(self._snapshot(), self.now, explain=False)
            if full.dispatches != plan.dispatches:
                raise SkipWasWrong(f"planning only {sorted(touched)} at {self.now} differs")
        return snapshot, plan

    def _snapshot(
        self,
        units: set[str] | None = None,
        freed: dict | None = None,
        also: set = frozenset(),
        with_victims: bool = True,
    ) -> Snapshot:
        """What the planner sees; with `units`, only the shares with a job waiting on one
        (under STRICT ordering only those whose head may start, with `freed` instances more
        free per unit than now, and the shares in `also` that have jobs waiting), and unless
        `with_victims`, no borrower's jobs as possible victims."""
        if not self.fast:
            jobs = (*self.dispatched.values(), *self.runnable.values())
            return Snapshot(
                dict(self.capacity), tuple(self.shares.values()), jobs, self.config.ordering
            )
        jobs: list[Job] = []
        runnable = self.runnable
        borrowed = self._borrowed_units()
        if units is None:
            classes = self.classes
            reclaim_units = None  # any borrower may lose jobs
        else:
            if self.config.ordering is Ordering.STRICT:
                # A STRICT share starts nothing unless its head can.
                planned = self._heads_that_may_start(units, borrowed, freed or {})
                planned |= {name for name in also if name in self.heads}
            else:
                planned = set().union(*(self.waiting_shares[u].keys() for u in units))
            classes = {key: self.classes[key] for s in planned for key in self.share_classes[s]}
            # Borrowers' jobs matter only as victims of a share below its limit on their unit.
            reclaim_units = {
                unit
                for name in planned
                for unit, limit in self.shares[name].limits.items()
                if with_victims and unit in borrowed and self.usage.get((name, unit), 0) < limit
            }
        for (_, unit, quantity), keys in classes.items():
            if keys:
                jobs.extend(
                    runnable[key[2]] for key in keys[: self.capacity.get(unit, 0) // quantity + 1]
                )
        return self._with_passive_shares_folded(jobs, reclaim_units)

    def _borrowed_units(self) -> set[str]:
        return {unit for unit, names in self.borrowers_on.items() if names}

    def _may_reclaim_after(self, jobs: dict[str, Job], plan: Plan) -> bool:
        """Planned without borrowers' jobs, could the plan have differed? Only where a head
        within its limit on a unit someone borrows did not simply fit: it is left waiting,
        or it preempted (a stand-in, or its own share's job) where a reclaim from the real
        borrowers' jobs would have started it."""
        borrowed = self._borrowed_units()
        if not borrowed:
            return False
        # A head that could not take capacity back may have preempted in its own share
        # instead (step 2), where a reclaim would have started it in step 1.
        if any(jobs[d.job_id].unit in borrowed for d in plan.dispatches if d.preempted):
            return True
        started = {d.job_id for d in plan.dispatches}
        added: dict[tuple[str, str], int] = defaultdict(int)
        heads: dict[str, tuple] = {}
        for job in jobs.values():
            if job.id in started:
                added[job.share, job.unit] += job.quantity
            elif job.dispatched_at is None:
                key = (-job.priority, job.created_at, job.id, job)
                if job.share not in heads or key < heads[job.share]:
                    heads[job.share] = key
        for name, (*_, head) in heads.items():
            if head.unit in borrowed:
                used = self.usage.get((name, head.unit), 0) + added[name, head.unit]
                if used + head.quantity <= self.shares[name].limits.get(head.unit, 0):
                    return True
        return False

    def _heads_that_may_start(
        self, units: set[str], borrowed: set[str], freed: dict[str, int]
    ) -> set[str]:
        """Shares whose head, on one of `units`, could start this tick: by fitting the free
        capacity (plus what `freed` says preemptions free), by taking capacity back within
        its limit from a borrower, or by preempting a lower-priority job of its own. Every
        other share is as blocked as at the last tick (a head on an unchanged unit is)."""
        planned = set()
        for unit in units:
            heads = self.heads_on.get(unit)
            if not heads:
                continue
            # At most what is free less the idle capacity reserving shares hold (summed over
            # them, which can only overstate what is left: a share above its limit holds none).
            free = self.capacity.get(unit, 0) - self.total.get(unit, 0)
            free -= max(0, self.reserve_limits_total[unit] - self.reserve_used_total[unit])
            free += freed.get(unit, 0)
            planned.update(self._heads_that_may_start_on(unit, heads, free, unit in borrowed))
        return planned

    def _heads_that_may_start_on(
        self, unit: str, heads: dict[str, Job], free: int, may_reclaim: bool
    ) -> list[str]:
        """The heads on `unit` that may start (see _heads_that_may_start): a head may start
        when it fits the free capacity (a reserving share's own idle capacity added) within
        its ceiling, when it may take capacity back within its limit, or when its share may
        preempt a lower-priority job of its own there. The hottest loop of a busy fleet, so
        each share's terms for the unit come from a table made once."""
        usage, priorities, terms = self.usage, self.priorities, self._head_terms
        found = []
        for name, head in heads.items():
            key = (name, unit)
            limit, ceiling, reserves, in_share = terms.get(key) or self._terms_of(key)
            used = usage.get(key, 0)
            needed = used + head.quantity
            available = free + limit - used if reserves and limit > used else free
            if (
                (needed <= ceiling and head.quantity <= available)
                or (may_reclaim and needed <= limit)
                or (in_share and (running := priorities.get(key)) and min(running) < head.priority)
            ):
                found.append(name)
        return found

    def _terms_of(self, key: tuple[str, str]) -> tuple[int, float, bool, bool]:
        """A share's limit, ceiling (infinite when only capacity bounds it), whether it
        reserves its idle capacity, and whether it preempts in-share, on one unit."""
        share = self.shares[key[0]]
        ceiling = share.ceiling(key[1])
        terms = (
            share.limit(key[1]),
            math.inf if ceiling is None else ceiling,
            share.reserves_idle,
            share.in_share_preemption,
        )
        self._head_terms[key] = terms
        return terms

    def _with_passive_shares_folded(
        self, runnable: list[Job], reclaim_units: set[str] | None
    ) -> Snapshot:
        """The snapshot with every share that has no job waiting (and borrowers that cannot
        lose a job: none of their borrowed units is in `reclaim_units`, where a planned share
        below its limit may take capacity back; None means every unit) folded into two
        stand-ins: one holding the reserving shares' limits and use (their idle capacity stays
        reserved), one holding the others' use. No such share can start a job or lose one, so
        only their totals matter to the plan."""
        keep = {job.share for job in runnable}
        # A borrower stays itself when it may lose jobs, and a reserving share above its limit
        # always (summed into the stand-in it would understate the idle capacity reserved).
        if reclaim_units is None:
            keep.update(self.borrowing)
        else:
            for unit in reclaim_units:
                keep |= self.borrowers_on[unit]
            keep.update(n for n in self.borrowing if n in self.reserving_names)
        jobs = runnable
        shares = []
        reserve_limits = dict(self.reserve_limits_total)
        reserve_used = dict(self.reserve_used_total)
        lend_used = dict(self.lend_used_total)
        waiting = {job.share for job in runnable}
        for name in keep:
            share = self.shares[name]
            shares.append(share)
            mine = self.by_share[name]
            if self._may_lose_jobs(name, name in waiting, reclaim_units):
                jobs.extend(mine.values())
            else:
                # Only its use counts: one stand-in per unit instead of each job.
                jobs.extend(
                    _stand_in(name, unit, n)
                    for unit in self.capacity
                    if (n := self.usage.get((name, unit), 0))
                )
            if share.reserves_idle:
                for unit, limit in share.limits.items():
                    reserve_limits[unit] -= limit
            used = reserve_used if share.reserves_idle else lend_used
            for job in mine.values():
                used[job.unit] -= job.quantity
        if any(reserve_limits.values()):
            shares.append(Share(FOLDED_RESERVE, dict(reserve_limits), Strategy.RESERVE))
            jobs.extend(_stand_in(FOLDED_RESERVE, u, n) for u, n in reserve_used.items() if n)
        if lend_used:
            shares.append(
                Share(FOLDED_LEND, {u: n for u, n in lend_used.items() if n}, Strategy.LEND)
            )
            jobs.extend(_stand_in(FOLDED_LEND, u, n) for u, n in lend_used.items() if n)
        return Snapshot(dict(self.capacity), tuple(shares), tuple(jobs), self.config.ordering)

    def _may_lose_jobs(self, name: str, waiting: bool, reclaim_units: set[str] | None) -> bool:
        """Could a plan preempt one of the share's jobs: for its own waiting head (in-share
        preemption), or to take back what it borrows?"""
        if waiting and self.shares[name].in_share_preemption:
            return True
        return self._reclaimable(self.borrowing.get(name, ()), reclaim_units)

    @staticmethod
    def _reclaimable(borrowed_units, reclaim_units: set[str] | None) -> bool:
        if reclaim_units is None:
            return bool(borrowed_units)
        return not reclaim_units.isdisjoint(borrowed_units)

    def _apply_plan(self, plan: Plan) -> None:
        preempted_any = False
        for dispatch in plan.dispatches:
            for preemption in dispatch.preempted:
                self._preempt(preemption.job_id, preemption.kind)
                preempted_any = True
            job = self.runnable[dispatch.job_id]
            self._dequeue(job)
            job = job._replace(dispatched_at=self.now)
            self.dispatched[job.id] = self.by_share[job.share][job.id] = job
            self._use(job, +1)
            self.attempt[job.id] += 1
            self.outcomes[job.id].dispatches.append(self.now)
            # Only a tick that changed nothing is a fixed point: from the next tick on this
            # job may be a victim (victims are jobs dispatched before a tick), and its share
            # has a new head, which may reclaim on another unit than this one. The live tick
            # too plans again after any change.
            self.dirty = True
            self._touch_share(job)
            if self.tick_s:
                self.unlaunched.add(job.id)
            elif dispatch.preempted and self.config.grace_s > 0:
                self._push(self.now + self.config.grace_s, START, (job.id, self.attempt[job.id]))
            else:
                self._begin_run(job.id)
        self.preempted_last_tick = preempted_any

    def _preempt(self, job_id: str, kind: PreemptionKind) -> None:
        job = self.dispatched.pop(job_id)
        del self.by_share[job.share][job_id]
        self._use(job, -1)
        self.unlaunched.discard(job_id)
        self.attempt[job_id] += 1
        self.outcomes[job_id].preemptions.append((self.now, kind.value))
        self.run.preemptions[kind.value] += 1
        self._enqueue(job._replace(dispatched_at=None))
        # The victim waits again on its unit and may now head its share: plan them next.
        self._touch_share(job)

    def _launch_unlaunched(self) -> None:
        """Fixed tick: what the last tick dispatched runs from this one (a SIMULATED backend)."""
        for job_id in sorted(self.unlaunched):
            self._begin_run(job_id)
        self.unlaunched.clear()

    def _begin_run(self, job_id: str) -> None:
        outcome = self.outcomes[job_id]
        if outcome.start_s is None:
            outcome.start_s = self.now
            self.unstarted -= 1
        outcome.runs += 1
        # Work done before a preemption is lost: every run takes the whole duration.
        self._push(self.now + self.work[job_id].duration_s, END, (job_id, self.attempt[job_id]))

    def _start_running(self, item: Running) -> None:
        """A job already running when the simulation starts (forward simulation from now)."""
        work = item.job
        self.work[work.id] = work
        self.outcomes[work.id] = JobOutcome(work, start_s=item.dispatched_at_s, runs=1)
        self.attempt[work.id] = 1
        job = Job(
            work.id,
            work.share,
            work.unit,
            work.quantity,
            work.priority,
            work.submit_s,
            item.dispatched_at_s,
        )
        self.dispatched[work.id] = self.by_share[job.share][work.id] = job
        self._use(job, +1)
        self._push(self.now + item.remaining_s, END, (work.id, 1))

    def _end(self, job_id: str) -> None:
        job = self.dispatched.pop(job_id)
        del self.by_share[job.share][job_id]
        self._use(job, -1)
        self.outcomes[job_id].end_s = self.now
        self.jobs_done += 1
        self.dirty = True
        self._touch(job.unit)

    # -- measuring -----------------------------------------------------------------------------

    def _use(self, job: Job, sign: int) -> None:
        key = (job.share, job.unit)
        self._settle(key)
        self._count_priority(key, job.priority, sign)
        delta = sign * job.quantity
        used = self.usage[key] = self.usage[key] + delta
        self.total[job.unit] += delta
        share = self.shares[job.share]
        (self.reserve_used_total if share.reserves_idle else self.lend_used_total)[job.unit] += (
            delta
        )
        borrowed_units = self.borrowing.get(job.share)
        if used > share.limits.get(job.unit, 0):
            if borrowed_units is None:
                borrowed_units = self.borrowing[job.share] = set()
            borrowed_units.add(job.unit)
            self.borrowers_on[job.unit].add(job.share)
        elif borrowed_units is not None:
            borrowed_units.discard(job.unit)
            self.borrowers_on[job.unit].discard(job.share)
            if not borrowed_units:
                del self.borrowing[job.share]

    def _count_priority(self, key: tuple[str, str], priority: int, sign: int) -> None:
        counts = self.priorities[key]
        counts[priority] += sign
        if not counts[priority]:
            del counts[priority]

    def _settle(self, key: tuple[str, str]) -> None:
        """Add the share's use of the unit since its last change to the time integrals."""
        since = self._since.get(key, self.now)
        used = self.usage[key]
        if used and self.now > since:
            limit = self.shares[key[0]].limit(key[1])
            self.run.own_s[key[0]] += min(used, limit) * (self.now - since)
            self.run.borrowed_s[key[0]] += max(0, used - limit) * (self.now - since)
        self._since[key] = self.now

    def _account(self, until: float) -> None:
        """Idle capacity while jobs waited, and the samples due, for the time up to `until`."""
        span = until - self.now
        if span > 0:
            for unit, waiting in self.waiting_shares.items():
                if waiting:
                    free = self.capacity.get(unit, 0) - self.total.get(unit, 0)
                    self.run.idle_while_waiting_s += max(0, free) * span
        if self.sample_every_s:
            while self.next_sample_s <= until:
                self._sample(self.next_sample_s)
                self.next_sample_s += self.sample_every_s

    def _sample(self, at: float) -> None:
        used: dict[str, dict[str, int]] = defaultdict(dict)
        for (share, unit), count in self.usage.items():
            if count:
                used[share][unit] = count
        self.run.samples.append((at, dict(used), dict(self.capacity)))
