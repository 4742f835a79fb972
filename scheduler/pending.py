"""Why each RUNNABLE job is still waiting after a tick, and where it stands.

The reason is read off the state the tick leaves behind, for the job at the head of its share
(with BEST_EFFORT ordering, for every job as if it were the head):

- NO_CAPACITY_LIMIT_FOR_UNIT: the share has no limit for the job's unit, so it never starts;
- EXCEEDS_SHARE_CEILING: the job needs more than the share's limit plus borrow ceiling (the
  limits were lowered after it was submitted), so it never starts;
- BEHIND_SHARE_HEAD: STRICT ordering and an earlier job of the share waits first;
- WAITING_FOR_CAPACITY: the job is within the share's limit but the capacity is in use;
- SHARE_AT_LIMIT: beyond the limit and the strategy (RESERVE, LEND) cannot borrow;
- BORROW_LIMIT_REACHED: beyond the limit plus the borrow ceiling;
- NOTHING_TO_BORROW: borrowing is allowed but no lendable capacity is idle.

Position in the queue follows the order the planner serves shares in: every share's first
job (shares by lowest usage ratio, then the head's priority and age, then name), then every
share's second job, and so on.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from itertools import accumulate, repeat
from operator import add, attrgetter, itemgetter

from scheduler.ledger import Ledger
from scheduler.model import Job, Ordering, Pending, PendingReason, Share, Strategy
from scheduler.queues import ShareQueue, order_key

_R = PendingReason


def reason_for(ledger: Ledger, share: Share, job: Job) -> PendingReason:
    unit = job.unit
    limit = share.limit(unit)
    if limit <= 0:
        return _R.NO_CAPACITY_LIMIT_FOR_UNIT
    if not share.could_ever_hold(job):
        return _R.EXCEEDS_SHARE_CEILING
    wanted = ledger.used(share, unit) + job.quantity
    fits_capacity = ledger.room_for(share, job) >= job.quantity
    if wanted <= limit or fits_capacity and ledger.within_ceiling(share, job):
        return _R.WAITING_FOR_CAPACITY
    if share.strategy is not Strategy.LEND_AND_BORROW:
        return _R.SHARE_AT_LIMIT
    if not ledger.within_ceiling(share, job):
        return _R.BORROW_LIMIT_REACHED
    return _R.NOTHING_TO_BORROW


def _final_entries(queue: ShareQueue, victims: list[Job]) -> list[tuple]:
    taken = queue.taken
    entries = queue.entries.every()
    if taken:
        entries = [entry for entry in entries if entry[3].id not in taken]
    if victims:
        entries = entries.copy()
        for victim in victims:
            bisect.insort(entries, (*order_key(victim), victim))
    return entries


def _share_rank_key(ledger: Ledger, share: Share, entries: list[tuple]) -> tuple:
    head = next((e[3] for e in entries if share.limit(e[3].unit) > 0), None)
    if head is None:
        return (float("inf"), 0, 0.0, share.name)
    ratio = ledger.used(share, head.unit) / share.limit(head.unit)
    return (ratio, -head.priority, head.created_at, share.name)


def _reasons(ledger: Ledger, share: Share, entries: list[tuple], ordering: Ordering) -> list:
    if ordering is Ordering.BEST_EFFORT:
        return [reason_for(ledger, share, e[3]) for e in entries]
    # STRICT: everything but the head is BEHIND_SHARE_HEAD, or stranded on a unit without a
    # limit. Written as C-level maps because this runs once per RUNNABLE job every tick.
    has_limit = {unit for unit, limit in share.limits.items() if limit > 0}.__contains__
    choice = (_R.NO_CAPACITY_LIMIT_FOR_UNIT, _R.BEHIND_SHARE_HEAD).__getitem__
    reasons = list(map(choice, map(has_limit, map(_unit, map(_job, entries)))))
    try:
        head = reasons.index(_R.BEHIND_SHARE_HEAD)
    except ValueError:
        return reasons
    reasons[head] = reason_for(ledger, share, entries[head][3])
    return reasons


_job = itemgetter(3)
_unit = attrgetter("unit")
_job_id = itemgetter(2)


class Explanation(Mapping):
    """A plan's pending reasons (job id -> Pending) and share ranking, worked out when first
    read: explaining every waiting job costs more than deciding what starts, and a caller that
    only needs the decisions, or the reasons of a few jobs, should not pay for all of them.

    It reads the tick's final state, which nothing changes once the plan is made."""

    def __init__(self, queues, preempted, ledger, ordering, positions, beyond=()):
        self._inputs = (queues, preempted, ledger, ordering, positions, beyond)
        self._pending: dict[str, Pending] | None = None
        self._ranking: tuple[str, ...] = ()

    def _worked_out(self) -> dict[str, Pending]:
        if self._pending is None:
            self._pending, self._ranking = pending_reasons(*self._inputs)
            self._inputs = None
        return self._pending

    def __getitem__(self, job_id: str) -> Pending:
        return self._worked_out()[job_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._worked_out())

    def __len__(self) -> int:
        return len(self._worked_out())

    def items(self):
        # The dict's own view: Mapping's would call __getitem__ once per job.
        return self._worked_out().items()

    @property
    def ranking(self) -> tuple[str, ...]:
        self._worked_out()
        return self._ranking


def pending_reasons(
    queues: Mapping[str, ShareQueue],
    preempted: Mapping[str, list[Job]],
    ledger: Ledger,
    ordering: Ordering,
    positions: bool = True,
    beyond: Sequence[Job] = (),
) -> tuple[dict[str, Pending], tuple[str, ...]]:
    """Pending info per RUNNABLE job, and the shares that have some in queue-rank order.
    Without `positions` every position is 0 (numbering 100k jobs is a third of the work).

    `beyond`: jobs known to wait behind the ones a narrow snapshot holds of their share. They
    get their reason (with STRICT ordering: behind the head) but no positions: numbering them
    needs the whole line."""
    per_share = []
    for name, queue in queues.items():
        entries = _final_entries(queue, preempted.get(name, []))
        if entries:
            rank = _share_rank_key(ledger, queue.share, entries)
            per_share.append((rank, entries, _reasons(ledger, queue.share, entries, ordering)))
    per_share.sort(key=lambda item: item[0])
    ranking = tuple(rank[3] for rank, _, _ in per_share)
    ranked = [(e, r) for _, e, r in per_share]
    if beyond or not positions:
        pending = _unnumbered(ranked)
        pending.update(_beyond_reasons(queues, ledger, ordering, beyond))
        return pending, ranking
    return _number_in_queue_order(ranked), ranking


def _beyond_reasons(queues, ledger: Ledger, ordering: Ordering, beyond: Sequence[Job]):
    for job in beyond:
        share = queues[job.share].share
        if ordering is Ordering.BEST_EFFORT:
            reason = reason_for(ledger, share, job)
        elif share.limit(job.unit) > 0:
            reason = _R.BEHIND_SHARE_HEAD
        else:
            reason = _R.NO_CAPACITY_LIMIT_FOR_UNIT
        yield job.id, _UNNUMBERED[reason]


_UNNUMBERED = {reason: Pending(reason, 0, 0) for reason in _R}


def _unnumbered(ranked: list[tuple[list, list]]) -> dict[str, Pending]:
    pending: dict[str, Pending] = {}
    for entries, reasons in ranked:
        unnumbered = map(_UNNUMBERED.__getitem__, reasons)
        pending.update(zip(map(_job_id, entries), unnumbered, strict=True))
    return pending


def _number_in_queue_order(ranked: list[tuple[list, list]]) -> dict[str, Pending]:
    """Round k holds every share's k-th job, shares in rank order; number jobs in that order.

    Round k starts at 1 + the sizes of rounds 0..k-1, and a share's place inside round k is
    the number of higher-ranked shares that also have a k-th job.
    """
    if not ranked:
        return {}
    longest = max(len(entries) for entries, _ in ranked)
    ending_at = [0] * longest
    for entries, _ in ranked:
        ending_at[len(entries) - 1] += 1
    round_sizes = list(accumulate(reversed(ending_at)))[::-1]  # shares with a k-th job
    round_start = list(accumulate(round_sizes, initial=1))
    numbered = [0] * longest
    make = partial(tuple.__new__, Pending)
    pending: dict[str, Pending] = {}
    for entries, reasons in ranked:
        n = len(entries)
        in_queue = list(map(add, round_start[:n], numbered[:n]))
        numbered[:n] = map(add, numbered[:n], repeat(1, n))
        rows = map(make, zip(reasons, range(1, n + 1), in_queue, strict=True))
        pending.update(zip(map(_job_id, entries), rows, strict=True))
    return pending
