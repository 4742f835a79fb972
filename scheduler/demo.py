"""python -m scheduler.demo [FILE] — tell a scenario as a story, tick by tick.

Without a file it tells AWS's quota-management walkthrough: three shares of one instance
each, a borrower, a lender that takes its capacity back, and a priority raise that triggers
in-share preemption. Each tick prints what started, what was preempted and why, how much of
its limit every share uses, and why each waiting job waits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scheduler.scenarios.format import Scenario, ScenarioError, Step, load
from scheduler.scenarios.runner import START_TIME, apply_step, check_expectations
from scheduler.scenarios.world import DISPATCHED, PureWorld, StepRejected

WALKTHROUGH = Path(__file__).parent / "scenarios" / "examples" / "aws_walkthrough.json"

PLAIN_REASONS = {
    "WAITING_FOR_CAPACITY": "within its share's limit, waiting for capacity to free up",
    "SHARE_AT_LIMIT": "its share is at its limit and may not borrow",
    "BORROW_LIMIT_REACHED": "its share has borrowed all its borrow limit allows",
    "NOTHING_TO_BORROW": "its share may borrow, but no idle capacity is lendable",
    "EXCEEDS_SHARE_CEILING": "it needs more than its share's limit plus borrow limit: never",
    "BEHIND_SHARE_HEAD": "waiting behind an earlier job of its share",
    "NO_CAPACITY_LIMIT_FOR_UNIT": "its share has no limit for this capacity unit",
}


class Storyteller:
    def __init__(self, scenario: Scenario, out):
        self.scenario = scenario
        self.world = PureWorld.of(scenario)
        self.out = out
        self.failures = 0

    def say(self, text: str = "") -> None:
        print(text, file=self.out)

    def tell(self) -> int:
        s = self.scenario
        self.say(f"== {s.name} ==")
        self.say(f"Capacity: {', '.join(f'{n} x {u}' for u, n in s.capacity.items())}")
        for spec in s.shares:
            limits = ", ".join(f"{n} x {u}" for u, n in spec.limits.items())
            extra = f", borrow limit {spec.borrow_limit}%" if spec.borrow_limit != -1 else ""
            preempt = ", in-share preemption" if spec.in_share_preemption else ""
            self.say(f"  share {spec.name}: {limits}, {spec.strategy}{extra}{preempt}")
        self.say()
        for step in s.steps:
            self.tell_step(step, START_TIME + step.index)
        verdict = "every check held" if not self.failures else f"{self.failures} check(s) FAILED"
        self.say(f"== end of story: {verdict} ==")
        return 1 if self.failures else 0

    def tell_step(self, step: Step, now: float) -> None:
        body = step.body
        if step.kind == "expect":
            results = list(check_expectations(body, self.world.observe(), "check"))
            self.failures += sum(not r.passed for r in results)
            failed = [r.line() for r in results if not r.passed]
            self.say("  (checks: " + ("all hold" if not failed else "; ".join(failed)) + ")")
            return
        try:
            apply_step(self.world, step, now)
        except StepRejected as err:
            self.say(f"{step.kind} {body.get('job', body.get('share', ''))} rejected: {err}")
            return
        if step.kind == "tick":
            self.tell_tick()
        else:
            self.say(describe_step(step))

    def tell_tick(self) -> None:
        plan = self.world.last_plan
        self.say("-- scheduler tick --")
        for dispatch in plan.dispatches:
            for p in dispatch.preempted:
                kind = (
                    "cross-share, reclaiming lent capacity"
                    if p.kind == "cross_share"
                    else "in-share, for a higher priority job"
                )
                self.say(f"  preempt {p.job_id} ({kind}) to make room for {p.preemptor_id}")
            how = "borrowing idle capacity" if dispatch.borrowing else "within its share's limit"
            self.say(f"  start   {dispatch.job_id} ({how})")
        if not plan.dispatches:
            self.say("  nothing starts")
        seen = self.world.observe()
        for name, share in self.world.shares.items():
            use = ", ".join(
                f"{seen.usage[name].get(u, 0)}/{limit} {u}" for u, limit in share.limits.items()
            )
            running = sorted(
                j
                for j, st in seen.status.items()
                if st == DISPATCHED and self.world.jobs[j].job.share == name
            )
            self.say(f"  {name:<8} uses {use}  running: {', '.join(running) or '-'}")
        for job_id, pending in sorted(plan.pending.items(), key=lambda kv: kv[1].position_in_queue):
            self.say(
                f"  waiting {job_id}: {PLAIN_REASONS[pending.reason]} "
                f"(#{pending.position_in_share} in share, #{pending.position_in_queue} in queue)"
            )


def describe_step(step: Step) -> str:
    body = step.body
    match step.kind:
        case "submit":
            return (
                f"submit {body['job']} to {body['share']}: {body.get('quantity', 1)} x "
                f"{body['unit']}, priority {body.get('priority', 0)}"
            )
        case "set_priority":
            return f"set priority of {body['job']} to {body['priority']}"
        case "finish":
            return f"{body['job']} ends: {body['status']}"
        case "terminate":
            return f"terminate {body['job']}"
        case "update_share":
            changes = ", ".join(f"{k}={v}" for k, v in body.items() if k != "share")
            return f"admin updates share {body['share']}: {changes}"
        case _:
            return f"capacity is now {', '.join(f'{n} x {u}' for u, n in body.items())}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", nargs="?", default=str(WALKTHROUGH), help="a scenario file")
    args = parser.parse_args(argv)
    try:
        scenario = load(args.file)
    except ScenarioError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return Storyteller(scenario, sys.stdout).tell()


if __name__ == "__main__":
    sys.exit(main())
