"""Who used what: a sweep over a queue's attempts that splits their instance-seconds into the
share's own capacity and borrowed capacity, the way the planner attributes borrowing, and
counts what each share lent and left idle while others waited.

The rules (docs/guides/usage.md states them for people):

- An attempt holds its instances from its start (dispatch) to its stop. While its share uses
  more of a unit than its limit, the excess U - L is attributed to the share's running
  attempts in victim order (lowest priority first, then the most recently started): those
  instance-seconds are *borrowed*, the rest *own*. A job that straddles the limit is split.
- A preempted attempt's instance-seconds, all of them, count as *preempted* (work lost) in
  the hour the preemption stopped it.
- *Lent* and *idle* per share follow the dashboard's attribution (utilization.unit_breakdown):
  borrowed instances come first from capacity no share covers, then from lending shares'
  idle capacity. *Idle while waiting* is a share's unused, unlent limit that was free while a
  job of another share waited on that unit (a RESERVE share's capacity, or capacity that
  borrow limits and strategies kept the waiting job from).
- Everything is cut at bucket (hour) boundaries, so ledgers of adjacent periods add up.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from scheduler.model import PreemptionKind, Share
from scheduler.utilization import unit_breakdown

HOUR = 3600.0
PREEMPTION_KINDS = tuple(kind.value for kind in PreemptionKind)


@dataclass(frozen=True, slots=True)
class Attempt:
    job: str
    key: tuple  # the report row it counts in
    share: str
    unit: str
    quantity: int
    gpus_per_instance: int
    priority: int
    created_at: float
    started_at: float
    stopped_at: float | None  # None: still running
    preempted: str = ""  # the kind of preemption that stopped it (PREEMPTION_KINDS)
    first: bool = False  # the job's first attempt: the job's wait ends at its start


@dataclass(frozen=True, slots=True)
class Terms:
    """A share's terms from `since` on, until its next Terms."""

    share: Share
    since: float
    key: tuple  # with the unit appended, the row its lent, idle and entitlement count in


@dataclass(frozen=True, slots=True)
class Waiting:
    """A job RUNNABLE from `start` to `end` (None: still waiting)."""

    share: str
    unit: str
    start: float
    end: float | None
    key: tuple = ()  # the report row its RUNNABLE time counts in (none: not counted)


@dataclass(slots=True)
class Figures:
    instance_seconds: float = 0.0
    gpu_seconds: float = 0.0
    own_instance_seconds: float = 0.0
    borrowed_instance_seconds: float = 0.0
    preempted: dict[str, float] = field(default_factory=dict)  # kind -> instance-seconds
    lent_instance_seconds: float = 0.0
    idle_while_waiting_instance_seconds: float = 0.0
    # Capacity other shares held idle (not lent) while this share's jobs waited.
    waited_beside_idle_instance_seconds: float = 0.0
    entitled_instance_seconds: float = 0.0  # the share's limit × time
    runnable_seconds: float = 0.0  # jobs' time RUNNABLE (job-seconds, whatever their size)
    attempts: int = 0
    jobs: int = 0  # jobs whose first attempt started
    waits: list[float] = field(default_factory=list)  # their waits, submitted -> first start

    @property
    def preempted_instance_seconds(self) -> float:
        return sum(self.preempted.values())


Ledger = dict[tuple[float, tuple], Figures]


def account(
    attempts: Iterable[Attempt],
    terms: Iterable[Terms],
    waiting: Iterable[Waiting],
    capacity: Mapping[str, int],
    start: float,
    end: float,
    bucket: float = HOUR,
) -> Ledger:
    """One queue's ledger over [start, end): (bucket start, row key) -> Figures."""
    ledger: Ledger = defaultdict(Figures)
    attempts = list(attempts)
    for attempt in attempts:
        _count_attempt(ledger, attempt, start, end, bucket)
    by_unit: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        by_unit[attempt.unit].append(attempt)
    waits_by_unit: dict[str, list[Waiting]] = defaultdict(list)
    for wait in waiting:
        waits_by_unit[wait.unit].append(wait)
        if wait.key:
            _count_waiting(ledger, wait, start, end, bucket)
    terms = sorted(terms, key=lambda t: t.since)
    _entitlements(ledger, terms, start, end, bucket)
    for unit in sorted(set(by_unit) | set(waits_by_unit)):
        sweep = _Sweep(ledger, unit, terms, capacity.get(unit, 0), bucket)
        sweep.run(by_unit[unit], waits_by_unit[unit], start, end)
    return dict(ledger)


def _entitlements(ledger: Ledger, terms: list[Terms], start: float, end: float, bucket) -> None:
    """Each share's limit × the time it held that limit, per unit."""
    following: dict[str, float] = {}
    for t in reversed(terms):
        until = following.get(t.share.name, end)
        following[t.share.name] = t.since
        t0, t1 = max(t.since, start), min(until, end)
        for unit, limit in t.share.limits.items():
            if limit <= 0:
                continue

            def add(b: float, seconds: float, key=(*t.key, unit), limit=limit) -> None:
                ledger[(b, key)].entitled_instance_seconds += limit * seconds

            spread(t0, t1, bucket, add)


def spread(t0: float, t1: float, bucket: float, add: Callable[[float, float], None]) -> None:
    """Call add(bucket start, seconds) for each bucket [t0, t1) overlaps."""
    b = math.floor(t0 / bucket) * bucket
    while b < t1:
        seconds = min(t1, b + bucket) - max(t0, b)
        if seconds > 0:
            add(b, seconds)
        b += bucket


def clipped(begin: float, stop: float | None, start: float, end: float) -> tuple[float, float]:
    """The part of [begin, stop) (stop None: still going) inside [start, end); empty when
    the first is not below the second."""
    return max(begin, start), min(end if stop is None else stop, end)


def bucket_of(t: float, bucket: float = HOUR) -> float:
    return math.floor(t / bucket) * bucket


def _count_attempt(ledger: Ledger, a: Attempt, start: float, end: float, bucket: float) -> None:
    """What an attempt adds by itself: its instance-seconds (all own until the sweep moves
    the borrowed part), its start, its job's wait, its loss to a preemption."""
    t0, t1 = clipped(a.started_at, a.stopped_at, start, end)

    def add(b: float, seconds: float) -> None:
        figures = ledger[(b, a.key)]
        figures.instance_seconds += a.quantity * seconds
        figures.gpu_seconds += a.quantity * a.gpus_per_instance * seconds
        figures.own_instance_seconds += a.quantity * seconds

    spread(t0, t1, bucket, add)
    if start <= a.started_at < end:
        figures = ledger[(bucket_of(a.started_at, bucket), a.key)]
        figures.attempts += 1
        if a.first:
            figures.jobs += 1
            figures.waits.append(max(0.0, a.started_at - a.created_at))
    if a.preempted and a.stopped_at is not None and start <= a.stopped_at < end:
        figures = ledger[(bucket_of(a.stopped_at, bucket), a.key)]
        lost = a.quantity * (a.stopped_at - a.started_at)
        figures.preempted[a.preempted] = figures.preempted.get(a.preempted, 0.0) + lost


def _count_waiting(ledger: Ledger, w: Waiting, start: float, end: float, bucket: float) -> None:
    def add(b: float, seconds: float) -> None:
        ledger[(b, w.key)].runnable_seconds += seconds

    spread(*clipped(w.start, w.end, start, end), bucket, add)


def _victim_order(a: Attempt) -> tuple:
    """scheduler.victims.victim_order for an attempt: sorted in reverse, first victim first."""
    return (-a.priority, a.started_at, a.created_at, a.job)


class _Sweep:
    """One unit of one queue, walked from event to event; between two events nothing changes."""

    def __init__(self, ledger: Ledger, unit: str, terms: list[Terms], capacity: int, bucket):
        self.ledger, self.unit, self.capacity, self.bucket = ledger, unit, capacity, bucket
        self.terms = terms
        self.current: dict[str, Terms] = {}
        self.shares: list[Share] = []  # the current terms' shares, by name
        self.running: dict[str, dict[str, Attempt]] = defaultdict(dict)
        self.use: dict[str, int] = defaultdict(int)  # kept as attempts come and go
        self.in_victim_order: dict[str, list[Attempt]] = {}  # sorted when first needed
        self.waiting: dict[str, int] = defaultdict(int)
        self.waited = 0

    def run(self, attempts: list[Attempt], waits: list[Waiting], start: float, end: float):
        events: list[tuple[float, int, object]] = []
        spans = [(a, a.started_at, a.stopped_at) for a in attempts]
        for item, begin, stop in spans + [(w, w.start, w.end) for w in waits]:
            t0, t1 = clipped(begin, stop, start, end)
            if t0 < t1:
                events.append((t0, 1, item))
                events.append((t1, 0, item))
        for t in self.terms:
            events.append((max(t.since, start), 2, t))
        events.sort(key=lambda e: (e[0], e[1]))
        now = start
        for time, kind, item in events:
            if time > now:
                self._segment(now, min(time, end))
                now = time
            if now >= end:
                break
            self._apply(kind, item)
        if now < end:
            self._segment(now, end)

    def _apply(self, kind: int, item) -> None:
        if isinstance(item, Terms):
            self.current[item.share.name] = item
            self.shares = sorted((t.share for t in self.current.values()), key=lambda s: s.name)
        elif isinstance(item, Attempt):
            if kind == 1:
                self.running[item.share][item.job] = item
                self.use[item.share] += item.quantity
            elif self.running[item.share].pop(item.job, None) is not None:
                self.use[item.share] -= item.quantity
            self.in_victim_order.pop(item.share, None)
        else:
            step = 1 if kind == 1 else -1
            self.waiting[item.share] += step
            self.waited += step

    def _segment(self, t0: float, t1: float) -> None:
        if t1 <= t0:
            return
        use = {name: used for name, used in self.use.items() if used}
        borrowing = False
        for name, used in use.items():
            terms = self.current.get(name)
            if terms is None:
                continue  # a share whose terms are unknown (deleted): all its use counts as own
            excess = used - terms.share.limit(self.unit)
            if excess > 0:
                borrowing = True
                self._attribute_borrowed(self._victims(name), excess, t0, t1)
        if borrowing or self.waited:
            self._lent_and_idle(use, self.waited, t0, t1)

    def _victims(self, share: str) -> list[Attempt]:
        order = self.in_victim_order.get(share)
        if order is None:
            order = sorted(self.running[share].values(), key=_victim_order, reverse=True)
            self.in_victim_order[share] = order
        return order

    def _attribute_borrowed(self, running: Iterable[Attempt], excess: int, t0, t1) -> None:
        for a in running:
            if excess <= 0:
                break
            borrowed = min(a.quantity, excess)
            excess -= borrowed

            def move(b: float, seconds: float, a=a, borrowed=borrowed) -> None:
                figures = self.ledger[(b, a.key)]
                figures.borrowed_instance_seconds += borrowed * seconds
                figures.own_instance_seconds -= borrowed * seconds

            spread(t0, t1, self.bucket, move)

    def _lent_and_idle(self, use: dict[str, int], waited: int, t0: float, t1: float) -> None:
        figures = unit_breakdown(self.shares, use, self.unit, self.capacity)
        idle_total = sum(f["idle"] for f in figures.values())
        for name, f in figures.items():
            mine_wait = self.waiting.get(name, 0)
            lent = f["lent"]
            idle = f["idle"] if waited - mine_wait > 0 else 0
            # Capacity other shares held idle while this share's jobs waited for some.
            beside = idle_total - f["idle"] if mine_wait > 0 else 0
            if not lent and not idle and not beside:
                continue
            key = (*self.current[name].key, self.unit)

            def add(b: float, seconds: float, key=key, lent=lent, idle=idle, beside=beside):
                row = self.ledger[(b, key)]
                row.lent_instance_seconds += lent * seconds
                row.idle_while_waiting_instance_seconds += idle * seconds
                row.waited_beside_idle_instance_seconds += beside * seconds

            spread(t0, t1, self.bucket, add)
