"""What-if drafts: a queue's shares, capacity and fair-share policy as a draft (draft_of),
its errors by the services' rules (draft_errors), and the draft as the simulator's queue
(config_of). whatif.runs replays drafts and applies them."""

from __future__ import annotations

from quotaportal.quotas.models import (
    JobQueue,
    QuotaShare,
    State,
    Team,
)
from quotaportal.quotas.services.fairness import policy_errors
from quotaportal.quotas.services.shares import (
    limits_of,
    weight_error,
)
from quotaportal.tick import bridge
from scheduler import Ordering, Share, Strategy
from scheduler.fairshare import Counts, Policy
from scheduler.simulate import QueueConfig
from scheduler.validation import (
    MAX_SHARES_PER_QUEUE,
    instance_count_error,
    share_config_errors,
)


def draft_of(queue: JobQueue) -> dict:
    """Today's settings of the queue, as a draft to edit."""
    shares = []
    for share in QuotaShare.objects.filter(job_queue=queue).select_related("team").order_by("name"):
        shares.append(
            {
                "name": share.name,
                "limits": limits_of(share),
                "strategy": share.sharing_strategy,
                "borrow_limit": share.borrow_limit
                if share.sharing_strategy == Strategy.LEND_AND_BORROW
                else -1,
                "in_share_preemption": share.in_share_preemption,
                "state": share.state,
                "weight": share.fair_share_weight,
                "team": share.team.name,
                "remove": False,
            }
        )
    return {
        "capacity": bridge.environment_limits(queue.service_environment),
        "fair_share": fair_share_of(queue),
        "shares": shares,
    }


def fair_share_of(queue: JobQueue) -> dict:
    return {
        "half_life_seconds": queue.fair_share_half_life_seconds,
        "counts": queue.fair_share_counts,
    }


def draft_errors(queue: JobQueue, draft: dict) -> dict[str, str]:
    """Field -> message for everything wrong in a draft (keys like shares[2].limits)."""
    errors: dict[str, str] = {}
    for unit, count in draft.get("capacity", {}).items():
        if message := instance_count_error(count, 0):
            errors["capacity"] = f"{unit}: {message}"
    existing = set(QuotaShare.objects.filter(job_queue=queue).values_list("name", flat=True))
    names = []
    for index, share in enumerate(draft.get("shares", [])):
        where = f"shares[{index}]"
        names.append(share["name"])
        if share.get("remove"):
            continue
        if error := weight_error(share.get("weight", 1.0)):
            errors[f"{where}.weight"] = error
        for key, message in share_config_errors(
            share["limits"], share["strategy"], share.get("borrow_limit", -1)
        ).items():
            errors[f"{where}.{ {'capacity_limits': 'limits'}.get(key, key) }"] = message
        if (
            share["name"] not in existing
            and not Team.objects.filter(name=share.get("team")).exists()
        ):
            errors[f"{where}.team"] = "a new share needs an existing team"
    if len(names) != len(set(names)):
        errors["shares"] = "share names must be unique"
    if (fair := draft.get("fair_share")) is not None:
        errors |= policy_errors(fair.get("half_life_seconds"), fair.get("counts", "borrowed"))
    kept = [s for s in draft.get("shares", []) if not s.get("remove")]
    if len(kept) > MAX_SHARES_PER_QUEUE:
        errors["shares"] = f"a job queue holds at most {MAX_SHARES_PER_QUEUE} quota shares"
    return errors


def config_of(queue: JobQueue, draft: dict) -> QueueConfig:
    shares = tuple(
        Share(
            s["name"],
            dict(s["limits"]),
            Strategy(s["strategy"]),
            s.get("borrow_limit", -1) if s["strategy"] == Strategy.LEND_AND_BORROW else -1,
            bool(s.get("in_share_preemption")),
            s.get("state", State.ENABLED) == State.ENABLED,
        )
        for s in draft["shares"]
        if not s.get("remove")
    )
    return QueueConfig(
        queue.name,
        dict(draft["capacity"]),
        shares,
        Ordering(queue.ordering),
        fair_share=policy_of(queue, draft),
    )


def policy_of(queue: JobQueue, draft: dict) -> Policy | None:
    fair = draft.get("fair_share") or fair_share_of(queue)
    if fair.get("half_life_seconds") is None:
        return None
    weights = {s["name"]: float(s.get("weight", 1.0)) for s in draft["shares"]}
    return Policy(float(fair["half_life_seconds"]), Counts(fair.get("counts", "borrowed")), weights)


# -- running -------------------------------------------------------------------------------
