"""What-if: replay a workload against a queue's share settings today and against a draft,
side by side, then apply the draft (through the share and environment services, audited) or
discard it.

A draft is the whole queue as the admin wants it:
    {"capacity": {unit: n},
     "fair_share": {"half_life_seconds": int | None, "counts": "borrowed" | "all"},
     "shares": [{"name", "limits": {unit: n}, "strategy", "borrow_limit", "in_share_preemption",
                 "state", "weight", "team" (new shares only), "remove": bool}]}
A draft without "fair_share" keeps the queue's policy; a share without "weight" weighs 1.
Both replays start with no past use (the account of a fair-share policy builds up as the
replayed jobs borrow).
Both replays use the environment's capacity (other queues on it are not replayed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import transaction

from quotaportal.quotas.errors import Conflict, InvalidInput
from quotaportal.quotas.models import (
    JobQueue,
    QuotaShare,
    State,
    Team,
    WhatIf,
    WhatIfSource,
    WhatIfStatus,
)
from quotaportal.quotas.permissions import require_admin
from quotaportal.quotas.services.environments import update_service_environment
from quotaportal.quotas.services.fairness import set_fair_share
from quotaportal.quotas.services.shares import (
    create_share,
    delete_share,
    limits_of,
    update_share,
)
from quotaportal.tick import bridge
from quotaportal.whatif.drafts import (
    config_of,
    draft_errors,
    draft_of,
    fair_share_of,
)
from quotaportal.whatif.replays.history import queue_history
from scheduler import Strategy
from scheduler.simulate import QueueConfig, QueueWorkload, Workload, simulate, utilization_series
from scheduler.simulate.loaders import SAMPLE_TRACE_DIR, alibaba_openb, find_trace_dir
from scheduler.simulate.workload import WorkloadError

log = logging.getLogger(__name__)

TRACE_JOBS = 1000  # the first pods of the trace a what-if replays
TRACE_SPEEDUP = 100  # the trace's times and durations divided by this
MAX_HISTORY_HOURS = 24 * 30


def start_what_if(
    actor,
    queue: JobQueue,
    draft: dict,
    source: str,
    since_hours: int,
    reasons: list[str] | None = None,
) -> WhatIf:
    """Record a what-if and queue its replays (a Celery task; at once when embedded).
    `reasons`: why the draft is what it is, when the portal drafted it."""
    require_admin(actor, "run what-if replays")
    errors = draft_errors(queue, draft)
    if source not in WhatIfSource.values:
        errors["source"] = f"replay one of: {', '.join(WhatIfSource.values)}"
    if not isinstance(since_hours, int) or not 1 <= since_hours <= MAX_HISTORY_HOURS:
        errors["since_hours"] = f"replay between 1 and {MAX_HISTORY_HOURS} hours of history"
    if errors:
        raise InvalidInput(errors)
    what_if = WhatIf.objects.create(
        job_queue=queue,
        created_by=actor,
        draft=draft,
        source=source,
        since_hours=since_hours,
        reasons=reasons or [],
    )
    transaction.on_commit(partial(_enqueue, str(what_if.id)))
    return what_if


_worker: Callable[[str], None] | None = None  # the Celery task's delay (quotas.tasks)


def use_worker(send: Callable[[str], None]) -> None:
    """How a what-if reaches a worker: the Celery entry points register it as they load, so
    this service does not import them."""
    global _worker
    _worker = send


def _enqueue(what_if_id: str) -> None:
    """A Celery task runs the replays; QP_WHATIF_IN_PROCESS runs them here instead (tests,
    and a server without a worker)."""
    if settings.QP_WHATIF_IN_PROCESS:
        run_what_if(what_if_id)
        return
    if _worker is None:
        raise RuntimeError("no what-if worker: quotaportal.quotas.tasks was never loaded")
    _worker(what_if_id)


def whole_trace_here() -> bool:
    """Are the whole trace's two files in QP_TRACE_DIR (or one folder below)?"""
    try:
        find_trace_dir(settings.QP_TRACE_DIR)
    except WorkloadError:
        return False
    return True


def trace_folder() -> Path:
    """Where the trace replayed comes from: QP_TRACE_DIR when the whole trace is there, else
    the sample shipped with the code (so a what-if can always replay one)."""
    return Path(settings.QP_TRACE_DIR) if whole_trace_here() else SAMPLE_TRACE_DIR


def run_what_if(what_if_id: str) -> None:
    """Replay the workload against today's settings and the draft; store both outcomes."""
    claimed = WhatIf.objects.filter(pk=what_if_id, status=WhatIfStatus.QUEUED).update(
        status=WhatIfStatus.RUNNING
    )
    if not claimed:
        return  # another worker has it, or it was discarded
    what_if = WhatIf.objects.select_related("job_queue__service_environment").get(pk=what_if_id)
    try:
        result = _replay_both(what_if)
    except Exception as err:  # a failed replay is shown on its page, not lost in a log
        log.exception("what-if %s failed", what_if_id)
        WhatIf.objects.filter(pk=what_if_id).update(status=WhatIfStatus.FAILED, error=str(err))
        return
    WhatIf.objects.filter(pk=what_if_id, status=WhatIfStatus.RUNNING).update(
        status=WhatIfStatus.DONE, progress=1.0, result=result
    )


def _replay_both(what_if: WhatIf) -> dict:
    queue = what_if.job_queue
    today = config_of(queue, draft_of(queue))
    draft = config_of(queue, what_if.draft)
    workload = _workload(what_if, today)
    removed = {s["name"] for s in what_if.draft["shares"] if s.get("remove")}
    notes = list(workload.notes)
    draft_jobs = tuple(j for j in workload.queues[0].jobs if j.share not in removed)
    if len(draft_jobs) < workload.job_count:
        notes.append(
            f"{workload.job_count - len(draft_jobs):,} jobs of removed shares are left out "
            "of the draft's replay"
        )
    progress = _Progress(what_if.pk)
    outcome = {}
    for index, (label, config, jobs) in enumerate(
        (("today", today, workload.queues[0].jobs), ("draft", draft, draft_jobs))
    ):
        run = simulate(
            Workload(workload.name, (QueueWorkload(config, jobs),)),
            progress=partial(progress, index),
        )
        summary = dict(run.queue_summaries[0])
        summary["series"] = utilization_series(run.runs[0])
        summary["capacity_total"] = sum(config.capacity.values())
        outcome[label] = summary
    # Today's settings as replayed, so the page can say what the draft changed even after
    # the queue's settings have moved on.
    return {"notes": notes, "jobs": workload.job_count, "today_config": draft_of(queue), **outcome}


def _workload(what_if: WhatIf, today: QueueConfig) -> Workload:
    queue = what_if.job_queue
    if what_if.source == WhatIfSource.HISTORY:
        return queue_history(queue, timedelta(hours=what_if.since_hours))
    return trace_onto(today, alibaba_openb(trace_folder()))


def trace_onto(config: QueueConfig, trace: Workload) -> Workload:
    """The trace's first TRACE_JOBS pods on this queue: QoS shares onto the queue's shares in
    name order (round robin), each on its share's first unit, TRACE_SPEEDUP times faster."""
    shares = sorted(config.shares, key=lambda s: s.name)
    jobs = sorted(trace.queues[0].jobs, key=lambda j: (j.submit_s, j.id))[:TRACE_JOBS]
    classes = sorted({j.share for j in jobs})
    target = {name: shares[i % len(shares)] for i, name in enumerate(classes)}
    first = jobs[0].submit_s if jobs else 0.0
    mapped = []
    for job in jobs:
        share = target[job.share]
        unit = sorted(share.limits)[0]
        largest = max(1, config.capacity.get(unit, 1))
        mapped.append(
            replace(
                job,
                share=share.name,
                unit=unit,
                quantity=min(job.quantity, largest),
                submit_s=(job.submit_s - first) / TRACE_SPEEDUP,
                duration_s=job.duration_s / TRACE_SPEEDUP,
            )
        )
    notes = (
        f"the first {len(mapped):,} GPU pods of the Alibaba openb trace, {TRACE_SPEEDUP}x "
        "faster; QoS classes onto shares: "
        + ", ".join(f"{qos} -> {share.name}" for qos, share in target.items()),
    )
    return Workload("openb-on-queue", (QueueWorkload(config, tuple(mapped)),), notes)


class _Progress:
    """Writes the replay's progress to its row at most twice a second."""

    def __init__(self, pk):
        self.pk = pk
        self.last = 0.0

    def __call__(self, replay_index: int, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.5:
            return
        self.last = now
        fraction = (replay_index + (done / total if total else 1.0)) / 2
        WhatIf.objects.filter(pk=self.pk, status=WhatIfStatus.RUNNING).update(
            progress=min(0.99, fraction)
        )


# -- deciding ------------------------------------------------------------------------------


@transaction.atomic
def apply_what_if(actor, what_if: WhatIf, fair_share_seed: dict | None = None) -> None:
    """Make the queue what the draft says, through the services (each change audited).
    `fair_share_seed` starts the account of a fair-share policy the draft switches on."""
    require_admin(actor, "apply what-if drafts")
    what_if = WhatIf.objects.select_for_update().get(pk=what_if.pk)
    if what_if.status != WhatIfStatus.DONE:
        raise Conflict(f"this what-if is {what_if.status}; only a finished one can be applied")
    queue = JobQueue.objects.select_related("service_environment").get(pk=what_if.job_queue_id)
    errors = draft_errors(queue, what_if.draft)
    if errors:
        raise InvalidInput(errors)
    draft = what_if.draft
    if draft["capacity"] != bridge.environment_limits(queue.service_environment):
        update_service_environment(
            actor, queue.service_environment, capacity_limits=draft["capacity"]
        )
    existing = {s.name: s for s in QuotaShare.objects.filter(job_queue=queue)}
    for entry in draft["shares"]:
        share = existing.get(entry["name"])
        if entry.get("remove"):
            if share is not None:
                if share.state != State.DISABLED:
                    share = update_share(actor, share, state=State.DISABLED)
                delete_share(actor, share, "Quota share deleted (what-if draft applied)")
            continue
        fields = {
            "capacity_limits": dict(entry["limits"]),
            "sharing_strategy": entry["strategy"],
            "borrow_limit": entry.get("borrow_limit", -1)
            if entry["strategy"] == Strategy.LEND_AND_BORROW
            else None,
            "in_share_preemption": bool(entry.get("in_share_preemption")),
            "state": entry.get("state", State.ENABLED),
            "fair_share_weight": float(entry.get("weight", 1.0)),
        }
        if share is None:
            create_share(
                actor,
                job_queue=queue,
                name=entry["name"],
                team=Team.objects.get(name=entry["team"]),
                **fields,
            )
        elif _differs(share, fields):
            update_share(actor, share, **{k: v for k, v in fields.items() if v is not None})
    fair = draft.get("fair_share")
    if fair is not None and fair != fair_share_of(queue):
        set_fair_share(
            actor,
            queue,
            half_life_seconds=fair.get("half_life_seconds"),
            counts=fair.get("counts", "borrowed"),
            seed=fair_share_seed,
        )
    what_if.status = WhatIfStatus.APPLIED
    what_if.save(update_fields=["status"])


def _differs(share: QuotaShare, fields: dict) -> bool:
    current = {
        "capacity_limits": limits_of(share),
        "sharing_strategy": share.sharing_strategy,
        "borrow_limit": share.borrow_limit
        if share.sharing_strategy == Strategy.LEND_AND_BORROW
        else None,
        "in_share_preemption": share.in_share_preemption,
        "state": share.state,
        "fair_share_weight": share.fair_share_weight,
    }
    return current != fields


def discard_what_if(actor, what_if: WhatIf) -> None:
    require_admin(actor, "discard what-if drafts")
    if what_if.status == WhatIfStatus.APPLIED:
        raise Conflict("this draft has been applied already")
    WhatIf.objects.filter(pk=what_if.pk).update(status=WhatIfStatus.DISCARDED)
