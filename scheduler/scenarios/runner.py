"""Plays a scenario against a World and checks each expectation.

Every `expect` key, every submission marked `expect_error`, every step the world refuses
unexpectedly and every invariant breach found in a tick becomes one Result line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from scheduler.reservations import Reservation
from scheduler.scenarios.format import START_TIME, Scenario, Step
from scheduler.scenarios.world import DISPATCHED, Observation, StepRejected, World

__all__ = ["START_TIME", "Result", "apply_step", "check_expectations", "play"]


@dataclass(frozen=True)
class Result:
    passed: bool
    where: str
    what: str
    detail: str = ""

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict} {self.where} {self.what}" + (f": {self.detail}" if self.detail else "")


def play(scenario: Scenario, world: World) -> Iterator[Result]:
    for step in scenario.steps:
        now = START_TIME + step.index
        where = f"{scenario.path} step {step.index}"
        if step.kind == "expect":
            yield from check_expectations(step.body, world.observe(), where)
            continue
        if step.kind == "submit" and step.body.get("expect_error"):
            yield _expect_rejection(world, step, now, where)
            continue
        try:
            apply_step(world, step, now)
        except StepRejected as err:
            yield Result(False, where, step.kind, f"rejected: {err}")
            continue
        if step.kind == "tick":
            for violation in world.observe().violations:
                yield Result(False, where, "invariant", violation)


def _expect_rejection(world: World, step: Step, now: float, where: str) -> Result:
    what = f"submit {step.body['job']} is rejected"
    try:
        apply_step(world, step, now)
    except StepRejected as err:
        return Result(True, where, what, str(err))
    return Result(False, where, what, "it was accepted")


def apply_step(world: World, step: Step, now: float) -> None:
    """Carry out one non-expect step; StepRejected when the world refuses it."""
    body = step.body
    match step.kind:
        case "submit":
            world.submit(
                now,
                body["job"],
                body["share"],
                body["unit"],
                body.get("quantity", 1),
                body.get("priority", 0),
                body.get("preemption_retries"),
                after=[(d["job"], d["type"]) for d in body.get("after", [])],
            )
        case "tick":
            world.tick(now)
        case "set_priority":
            world.set_priority(now, body["job"], body["priority"])
        case "finish":
            world.finish(now, body["job"], body["status"])
        case "terminate":
            world.terminate(now, body["job"])
        case "update_share":
            changes = {k: v for k, v in body.items() if k != "share"}
            world.update_share(now, body["share"], changes)
        case "set_capacity":
            world.set_capacity(now, body)
        case "reserve":
            world.reserve(
                now,
                Reservation(
                    body["name"],
                    body["unit"],
                    body["instances"],
                    START_TIME + body["start"],
                    START_TIME + body["end"],
                ),
            )


def _with_status(status: str) -> Callable[[Observation], set[str]]:
    return lambda seen: {job for job, s in seen.status.items() if s == status}


def _preempted(kind: str | None) -> Callable[[Observation], set[str]]:
    return lambda seen: {job for job, k in seen.last_preempted.items() if kind in (None, k)}


JOB_SETS: dict[str, Callable[[Observation], set[str]]] = {
    "dispatched": _with_status(DISPATCHED),
    "runnable": _with_status("RUNNABLE"),
    "pending": _with_status("PENDING"),  # waiting on dependencies: in no plan
    "succeeded": _with_status("SUCCEEDED"),
    "failed": _with_status("FAILED"),
    "preempted": _preempted(None),
    "preempted_cross_share": _preempted("cross_share"),
    "preempted_in_share": _preempted("in_share"),
    "preempted_capacity": _preempted("capacity"),
}


def check_expectations(expect: dict, seen: Observation, where: str) -> Iterator[Result]:
    for key, wanted in expect.items():
        if key in JOB_SETS:
            got = JOB_SETS[key](seen)
            ok = got == set(wanted)
            yield Result(
                ok, where, key, "" if ok else f"expected {sorted(wanted)}, got {sorted(got)}"
            )
        else:
            got = _mapping(key, wanted, seen)
            ok = got == wanted
            yield Result(ok, where, key, "" if ok else f"expected {wanted}, got {got}")


def _mapping(key: str, wanted: dict, seen: Observation) -> dict:
    if key == "usage":
        return {
            share: {unit: seen.usage.get(share, {}).get(unit, 0) for unit in units}
            for share, units in wanted.items()
        }
    source = seen.pending_reason if key == "pending_reason" else seen.preempted_count
    return {job: source.get(job) for job in wanted}
