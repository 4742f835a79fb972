"""A what-if in words: what the draft changes against today's settings, and a one-sentence
verdict on its replay against today's."""

from __future__ import annotations

from quotaportal.quotas.standings import half_life_words
from quotaportal.web.numbers import duration, instance_hours

SHARE_FIELDS = (
    ("limits", "limits"),
    ("strategy", "strategy"),
    ("borrow_limit", "borrow limit"),
    ("in_share_preemption", "in-share preemption"),
    ("state", "state"),
    ("weight", "fair-share weight"),
)
FIELD_DEFAULTS = {"weight": 1.0}  # what a share saved without the field has
MEANINGFUL = 0.05  # a figure within 5 % of today's is "about the same"


def _limits(limits: dict) -> str:
    return ", ".join(f"{n} {unit}" for unit, n in sorted(limits.items())) or "none"


def _shown(field: str, value) -> str:
    if field == "limits":
        return _limits(value)
    if field == "borrow_limit":
        return "unlimited" if value in (-1, None) else f"{value} %"
    if field == "in_share_preemption":
        return "on" if value else "off"
    return str(value)


def draft_changes(today: dict, draft: dict) -> list[str]:
    """Each difference between today's settings and the draft, as a line for people."""
    changes = []
    if today.get("capacity") != draft.get("capacity"):
        changes.append(
            f"Capacity: {_limits(today.get('capacity', {}))} → {_limits(draft.get('capacity', {}))}"
        )
    fair = draft.get("fair_share")
    if fair is not None and _policy(fair) != _policy(today.get("fair_share")):
        changes.append(f"Fair share: {_policy(today.get('fair_share'))} → {_policy(fair)}")
    before = {s["name"]: s for s in today.get("shares", [])}
    for share in draft.get("shares", []):
        name = share["name"]
        if share.get("remove"):
            changes.append(f"Share {name} removed (its unfinished jobs are terminated)")
            continue
        if name not in before:
            team = f" for team {share['team']}" if share.get("team") else ""
            changes.append(
                f"New share {name}{team}: {_limits(share.get('limits', {}))}, "
                f"{share.get('strategy', '')}"
            )
            continue
        for field, label in SHARE_FIELDS:
            old = before[name].get(field, FIELD_DEFAULTS.get(field))
            new = share.get(field, FIELD_DEFAULTS.get(field))
            if old != new:
                changes.append(f"Share {name}: {label} {_shown(field, old)} → {_shown(field, new)}")
    return changes


def _policy(fair: dict | None) -> str:
    if not fair or fair.get("half_life_seconds") is None:
        return "off"
    return (
        f"{fair.get('counts', 'borrowed')} use halving every "
        f"{half_life_words(fair['half_life_seconds'])}"
    )


def _moved(old, new) -> bool:
    if old is None or new is None:
        return old != new
    return abs(new - old) > MEANINGFUL * max(abs(old), 1e-9)


def _wait_phrase(label: str, old, new) -> str | None:
    if not _moved(old, new) or old is None or new is None:
        return None
    way = "fall" if new < old else "rise"
    return f"waits {label} {way} from {duration(old)} to {duration(new)}"


def verdict(today: dict, draft: dict) -> str:
    """'With the draft, waits p90 fall from 3 h to 40 min; 2 fewer preemptions.'"""
    parts = [
        phrase
        for phrase in (
            _wait_phrase("p90", today.get("wait_p90_s"), draft.get("wait_p90_s")),
            _wait_phrase("p50", today.get("wait_p50_s"), draft.get("wait_p50_s")),
        )
        if phrase
    ]
    if _moved(today.get("makespan_s"), draft.get("makespan_s")):
        parts.append(
            f"the last job ends after {duration(draft['makespan_s'])} instead of "
            f"{duration(today['makespan_s'])}"
        )
    fewer = today.get("preemptions", 0) - draft.get("preemptions", 0)
    if fewer:
        count = abs(fewer)
        parts.append(f"{count} {'fewer' if fewer > 0 else 'more'} preemption{'s' * (count != 1)}")
    old_idle = today.get("idle_instance_hours_while_waiting")
    new_idle = draft.get("idle_instance_hours_while_waiting")
    if _moved(old_idle, new_idle):
        parts.append(
            f"capacity idle while jobs waited {instance_hours(old_idle)} → "
            f"{instance_hours(new_idle)}"
        )
    if not parts:
        return "The draft changes little: waits, the makespan and preemptions stay within 5 %."
    return "With the draft, " + "; ".join(parts) + "."


def worse(today: dict, draft: dict) -> list[str]:
    """Where the draft's replay did worse than today's settings, one phrase each: a
    suggestion that makes waits longer must say so before anyone applies it."""
    found = []
    for label, key in (("p90", "wait_p90_s"), ("p50", "wait_p50_s")):
        old, new = today.get(key), draft.get(key)
        if better(old, new) == "worse":
            found.append(f"waits {label} rise from {duration(old)} to {duration(new)}")
    if better(today.get("makespan_s"), draft.get("makespan_s")) == "worse":
        found.append(
            f"the last job ends after {duration(draft['makespan_s'])} instead of "
            f"{duration(today['makespan_s'])}"
        )
    more = draft.get("preemptions", 0) - today.get("preemptions", 0)
    if more > 0:
        found.append(f"{more} more preemption{'s' * (more != 1)}")
    return found


def better(today, draft, lower_is_better: bool = True) -> str:
    """'better', 'worse' or '' for a figure of the draft against today's (for highlighting)."""
    if not _moved(today, draft) or today is None or draft is None:
        return ""
    improved = draft < today if lower_is_better else draft > today
    return "better" if improved else "worse"
