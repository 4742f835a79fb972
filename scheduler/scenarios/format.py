"""Reading scenario files (format in shared/scenarios/README.md) into checked, typed steps.

Anything malformed raises ScenarioError naming the file and the step, so a typo in a
scenario is reported as such instead of surfacing as a confusing FAIL later.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduler.model import Ordering, Strategy

STEP_FIELDS: dict[str, tuple[set[str], set[str]]] = {
    # step kind: (required fields, optional fields)
    "submit": (
        {"job", "share", "unit"},
        {"quantity", "priority", "preemption_retries", "expect_error", "after"},
    ),
    "tick": (set(), set()),
    "set_priority": ({"job", "priority"}, set()),
    "finish": ({"job", "status"}, set()),
    "terminate": ({"job"}, set()),
    "update_share": (
        {"share"},
        {"limits", "strategy", "borrow_limit", "in_share_preemption", "state"},
    ),
    "set_capacity": (set(), None),  # free-form {unit: count}
    # Reserved capacity: `instances` more of `unit` from step `start` (inclusive) to step
    # `end` (exclusive); steps are seconds on the scenario's clock.
    "reserve": ({"name", "unit", "instances", "start", "end"}, set()),
    "expect": (
        set(),
        {
            "dispatched",
            "runnable",
            "succeeded",
            "failed",
            "preempted",
            "preempted_cross_share",
            "preempted_in_share",
            "preempted_capacity",
            "usage",
            "pending_reason",
            "preempted_count",
            "pending",
        },
    ),
}
START_TIME = 1_000_000.0  # any fixed origin; each step advances the clock by one second
TOP_FIELDS = {"name", "description", "capacity", "ordering", "shares", "steps", "fair_share"}
FAIR_FIELDS = {"half_life", "counts", "weights", "history"}
SHARE_FIELDS = {"name", "limits", "strategy", "borrow_limit", "in_share_preemption", "state"}


class ScenarioError(ValueError):
    """A scenario file that cannot be played; the message names the file and the step."""


@dataclass(frozen=True)
class ShareSpec:
    name: str
    limits: dict[str, int]
    strategy: Strategy
    borrow_limit: int = -1
    in_share_preemption: bool = False
    enabled: bool = True


@dataclass(frozen=True)
class Step:
    index: int  # 1-based, as people count steps in a file
    kind: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    path: str
    name: str
    capacity: dict[str, int]
    ordering: Ordering
    shares: tuple[ShareSpec, ...]
    steps: tuple[Step, ...] = field(default=())
    # A fair-share policy (scheduler.fairshare), with each share's decayed use at time 0.
    fair_share: FairShareSpec | None = None


@dataclass(frozen=True)
class FairShareSpec:
    half_life: float
    counts: str = "borrowed"
    weights: dict[str, float] = field(default_factory=dict)
    # Each share's decayed use (instance-seconds) as the scenario starts.
    history: dict[str, float] = field(default_factory=dict)


def load(path: str | Path) -> Scenario:
    label = str(path)
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise ScenarioError(f"{label}: cannot read: {err.strerror}") from err
    except json.JSONDecodeError as err:
        raise ScenarioError(f"{label}: not valid JSON: {err}") from err
    return parse(data, label)


def parse(data: Any, label: str) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{label}: the file must hold one JSON object")
    _no_unknown(data, TOP_FIELDS, f"{label}")
    for required in ("capacity", "shares", "steps"):
        if required not in data:
            raise ScenarioError(f"{label}: missing {required!r}")
    ordering = data.get("ordering", "STRICT")
    if ordering not in Ordering.__members__:
        raise ScenarioError(f"{label}: ordering must be STRICT or BEST_EFFORT, got {ordering!r}")
    capacity = unit_counts(data["capacity"], f"{label}: capacity")
    if not isinstance(data["shares"], list) or not isinstance(data["steps"], list):
        raise ScenarioError(f"{label}: 'shares' and 'steps' must be lists")
    shares = tuple(parse_share(s, f"{label}: shares[{i}]") for i, s in enumerate(data["shares"]))
    names = [s.name for s in shares]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{label}: share names must be unique")
    steps = tuple(_step(s, i + 1, label) for i, s in enumerate(data["steps"]))
    fair = _fair_share(data["fair_share"], set(names), label) if "fair_share" in data else None
    return Scenario(
        label, str(data.get("name", label)), capacity, Ordering(ordering), shares, steps, fair
    )


def _fair_share(raw: Any, shares: set[str], label: str) -> FairShareSpec:
    """{"half_life": seconds, "counts": "borrowed" | "all", "weights": {share: w > 0},
    "history": {share: decayed instance-seconds as the scenario starts}}."""
    where = f"{label}: fair_share"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where} must be an object")
    _no_unknown(raw, FAIR_FIELDS, where)
    half_life = raw.get("half_life")
    if isinstance(half_life, bool) or not isinstance(half_life, int | float) or half_life <= 0:
        raise ScenarioError(f"{where}: half_life must be a number of seconds above 0")
    counts = raw.get("counts", "borrowed")
    if counts not in ("borrowed", "all"):
        raise ScenarioError(f"{where}: counts must be borrowed or all")
    numbers = {}
    for key, allows in (("weights", lambda v: v > 0), ("history", lambda v: v >= 0)):
        table = raw.get(key, {})
        if not isinstance(table, dict) or not set(table) <= shares:
            raise ScenarioError(f"{where}: {key} must map names of the scenario's shares")
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and allows(v)
            for v in table.values()
        ):
            rule = "above 0" if key == "weights" else "of 0 or more"
            raise ScenarioError(f"{where}: {key} must be numbers {rule}")
        numbers[key] = {name: float(v) for name, v in table.items()}
    return FairShareSpec(float(half_life), counts, numbers["weights"], numbers["history"])


def _no_unknown(body: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ScenarioError(f"{where}: unknown field(s) {', '.join(unknown)}")


def unit_counts(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value.values()
    ):
        raise ScenarioError(f"{where}: must map capacity units to whole numbers >= 0")
    return dict(value)


def parse_share(body: Any, where: str) -> ShareSpec:
    """One share object of a scenario (or a simulator workload), checked."""
    if not isinstance(body, dict):
        raise ScenarioError(f"{where}: must be an object")
    _no_unknown(body, SHARE_FIELDS, where)
    if "name" not in body or "limits" not in body or "strategy" not in body:
        raise ScenarioError(f"{where}: needs name, limits and strategy")
    strategy = body["strategy"]
    if strategy not in Strategy.__members__:
        raise ScenarioError(f"{where}: unknown strategy {strategy!r}")
    if "borrow_limit" in body and strategy != Strategy.LEND_AND_BORROW:
        raise ScenarioError(f"{where}: borrow_limit is only allowed with LEND_AND_BORROW")
    state = body.get("state", "ENABLED")
    if state not in ("ENABLED", "DISABLED"):
        raise ScenarioError(f"{where}: state must be ENABLED or DISABLED")
    return ShareSpec(
        name=str(body["name"]),
        limits=unit_counts(body["limits"], f"{where}.limits"),
        strategy=Strategy(strategy),
        borrow_limit=body.get("borrow_limit", -1),
        in_share_preemption=bool(body.get("in_share_preemption", False)),
        enabled=state == "ENABLED",
    )


def _step(raw: Any, index: int, label: str) -> Step:
    where = f"{label}: step {index}"
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ScenarioError(f"{where}: each step must be an object with exactly one key")
    ((kind, body),) = raw.items()
    if kind not in STEP_FIELDS:
        raise ScenarioError(f"{where}: unknown step {kind!r}")
    if not isinstance(body, dict):
        raise ScenarioError(f"{where}: the body of {kind!r} must be an object")
    required, optional = STEP_FIELDS[kind]
    missing = sorted(required - set(body))
    if missing:
        raise ScenarioError(f"{where}: {kind} needs {', '.join(missing)}")
    if optional is not None:
        _no_unknown(body, required | optional, f"{where} ({kind})")
    else:
        unit_counts(body, f"{where} ({kind})")
    if kind == "finish" and body["status"] not in ("SUCCEEDED", "FAILED"):
        raise ScenarioError(f"{where}: finish status must be SUCCEEDED or FAILED")
    if kind == "reserve":
        _check_reservation(body, where)
    if kind == "submit" and "after" in body:
        _check_after(body["after"], where)
    return Step(index, kind, body)


AFTER_KINDS = ("afterok", "afterany", "afternotok")


def _check_after(after: Any, where: str) -> None:
    """A submit's dependencies: [{"job": name, "type": afterok | afterany | afternotok}]."""
    if not isinstance(after, list) or not all(
        isinstance(d, dict) and set(d) == {"job", "type"} and d["type"] in AFTER_KINDS
        for d in after
    ):
        raise ScenarioError(
            f"{where}: after must be a list of {{job, type}} with type one of "
            f"{', '.join(AFTER_KINDS)}"
        )


def _check_reservation(body: dict, where: str) -> None:
    numbers = [body["instances"], body["start"], body["end"]]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
        raise ScenarioError(f"{where}: instances, start and end must be whole numbers >= 0")
    if body["instances"] < 1 or body["end"] <= body["start"]:
        raise ScenarioError(f"{where}: a reservation needs instances >= 1 and end after start")
