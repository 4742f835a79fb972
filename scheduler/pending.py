"""Why each RUNNABLE job is still waiting after a tick, and where it stands.

The reason is read off the state the tick leaves behind, for the job at the head of its share
(with BEST_EFFORT ordering, for every job as if it were the head):

- NO_CAPACITY_LIMIT_FOR_UNIT: the share has no limit for the job's unit, so it never starts;
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
from collections.abc import Mapping

from scheduler.ledger import Ledger
from scheduler.model import Job, Ordering, Pending, PendingReason, Share, Strategy
from scheduler.queues import ShareQueue, order_key

_R = PendingReason


def reason_for(ledger: Ledger, share: Share, job: Job) -> PendingReason:
    unit = job.unit
    limit = share.limit(unit)
    if limit <= 0:
        return _R.NO_CAPACITY_LIMIT_FOR_UNIT
    wanted = ledger.used(share, unit) + job.quantity
    fits_capacity = ledger.available_to(share, unit) >= job.quantity
    if wanted <= limit or fits_capacity and ledger.within_ceiling(share, job):
        return _R.WAITING_FOR_CAPACITY
    if share.strategy is not Strategy.LEND_AND_BORROW:
        return _R.SHARE_AT_LIMIT
    if not ledger.within_ceiling(share, job):
        return _R.BORROW_LIMIT_REACHED
    return _R.NOTHING_TO_BORROW


def _final_entries(queue: ShareQueue, victims: list[Job]) -> list[tuple]:
    taken = queue.taken
    entries = (
        [entry for entry in queue.entries if entry[3].id not in taken] if taken else queue.entries
    )
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
    reasons = []
    head_seen = False
    for entry in entries:
        job = entry[3]
        if share.limit(job.unit) <= 0:
            reasons.append(_R.NO_CAPACITY_LIMIT_FOR_UNIT)
        elif head_seen:
            reasons.append(_R.BEHIND_SHARE_HEAD)
        else:
            reasons.append(reason_for(ledger, share, job))
            head_seen = True
    return reasons


def pending_reasons(
    queues: Mapping[str, ShareQueue],
    preempted: Mapping[str, list[Job]],
    ledger: Ledger,
    ordering: Ordering,
) -> dict[str, Pending]:
    per_share = []
    for name, queue in queues.items():
        entries = _final_entries(queue, preempted.get(name, []))
        if entries:
            rank = _share_rank_key(ledger, queue.share, entries)
            per_share.append((rank, entries, _reasons(ledger, queue.share, entries, ordering)))
    per_share.sort(key=lambda item: item[0])

    # Queue position: round k holds every share's k-th job, shares in rank order.
    rounds: list[list[str]] = []
    for _, entries, _ in per_share:
        for k, entry in enumerate(entries):
            if k == len(rounds):
                rounds.append([])
            rounds[k].append(entry[2])
    queue_position = {}
    position = 0
    for round_ids in rounds:
        for job_id in round_ids:
            position += 1
            queue_position[job_id] = position

    pending = {}
    for _, entries, reasons in per_share:
        for index, (entry, reason) in enumerate(zip(entries, reasons, strict=True)):
            job_id = entry[2]
            pending[job_id] = Pending(reason, index + 1, queue_position[job_id])
    return pending
