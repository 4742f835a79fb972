"""python -m scheduler.simulate (--trace DIR | --kueue-baseline | --fleet N | --workload FILE)
[--config CONFIG] [--tick SECONDS] [--json]

Replays a workload through the scheduler and prints what happened: per queue and share the
waits, preemptions, borrowed and idle instance-hours, and how the makespan compares with the
capacity bound. With --json the last line is one JSON object (jobs, makespan_s,
capacity_bound_s, wait_p50_s, wait_p99_s, preemptions, wall_s, ...). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from scheduler.invariants import InvariantViolation
from scheduler.simulate import simulate
from scheduler.simulate.accuracy import estimate_accuracy
from scheduler.simulate.fair_compare import comparison_lines, policy_from, with_policy
from scheduler.simulate.loaders import alibaba_openb, fleet, kueue_baseline
from scheduler.simulate.workload import WorkloadError, apply_config, load_workload, scaled


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.simulate",
        description="Replay a workload through quotaportal's scheduler, event to event.",
    )
    _workload_arguments(parser)
    _replay_arguments(parser)
    _fair_share_arguments(parser)
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    return parser


def _workload_arguments(parser) -> None:
    """What is replayed: one source, and the shape of a synthetic fleet."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", metavar="DIR", help="the Alibaba openb trace folder")
    source.add_argument(
        "--kueue-baseline",
        action="store_true",
        help="Kueue's scheduler-performance baseline shape (15,000 jobs)",
    )
    source.add_argument(
        "--fleet", type=int, metavar="N", help="a synthetic fleet of N jobs over --shares shares"
    )
    source.add_argument("--workload", metavar="FILE", help="a workload JSON file")
    parser.add_argument("--shares", type=int, default=1000, help="shares of --fleet")
    parser.add_argument("--load", type=float, default=0.8, help="load of --fleet")
    parser.add_argument(
        "--uniform-demand",
        action="store_true",
        help="--fleet: every share submits as often (a stress case) instead of by its quota",
    )


def _replay_arguments(parser) -> None:
    """How it is replayed: configuration, tick, checks, scale, estimates."""
    parser.add_argument(
        "--config", metavar="CONFIG", help="a JSON file with queue settings to replay instead"
    )
    parser.add_argument(
        "--tick",
        type=float,
        metavar="SECONDS",
        help="tick on this fixed period, like the live system",
    )
    parser.add_argument(
        "--no-check", action="store_true", help="skip the invariant check of every plan (faster)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        metavar="F",
        help="replay on a cluster F times the size (capacities and share limits scaled)",
    )
    parser.add_argument(
        "--estimates",
        action="store_true",
        help="also measure start-time estimates against the replay (median and p90 error)",
    )


def _fair_share_arguments(parser) -> None:
    parser.add_argument(
        "--fair-share",
        metavar="HALF_LIFE",
        help="replay under a fair-share policy whose past use halves every HALF_LIFE "
        "(7d, 12h, 30m or seconds): borrowers by decayed past use, lowest first",
    )
    parser.add_argument(
        "--fair-share-counts",
        choices=["borrowed", "all"],
        default="borrowed",
        help="what past use counts under --fair-share (default: borrowed)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="with --fair-share: replay without it too and print both side by side",
    )


def _load(args) -> object:
    if args.trace:
        return alibaba_openb(args.trace)
    if args.kueue_baseline:
        return kueue_baseline()
    if args.fleet is not None:
        if args.fleet < 1 or args.shares < 1:
            raise WorkloadError("--fleet and --shares must be at least 1")
        if not 0 < args.load <= 10:
            raise WorkloadError("--load must be above 0 and at most 10")
        return fleet(args.fleet, args.shares, args.load, uniform_demand=args.uniform_demand)
    return load_workload(args.workload)


class _Progress:
    """A line on stderr every few seconds of a long run."""

    def __init__(self, out):
        self.out = out
        self.began = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last >= 2 or done == total:
            self.last = now
            self.out.write(f"  {done:,}/{total:,} jobs done, {now - self.began:.0f} s\n")
            self.out.flush()


def _print_human(result, out) -> None:
    for note in result.workload.notes:
        out.write(f"# {note}\n")
    for summary in result.queue_summaries:
        out.write(
            f"queue {summary['queue']}: {summary['jobs']:,} jobs, {summary['finished']:,} "
            f"finished, makespan {summary['makespan_s']:,} s (capacity bound "
            f"{summary['capacity_bound_s']:,} s), wait p50 {summary['wait_p50_s']} s / p99 "
            f"{summary['wait_p99_s']} s, {summary['preemptions']:,} preemptions "
            f"{summary['preemptions_by_kind']}, borrowed {summary['borrowed_instance_hours']:,} "
            f"instance-h, idle while jobs waited {summary['idle_instance_hours_while_waiting']:,} "
            f"instance-h, {summary['ticks_planned']:,} ticks planned\n"
        )
        shares = summary["shares"]
        if len(shares) <= 30:
            for name, figures in shares.items():
                out.write(
                    f"  {name}: {figures['jobs']:,} jobs, wait p50 {figures['wait_p50_s']} s "
                    f"p99 {figures['wait_p99_s']} s, own {figures['own_hours']:,} h, borrowed "
                    f"{figures['borrowed_hours']:,} h, {figures['preemptions']:,} preempted\n"
                )
    total = result.summary
    out.write(
        f"all: {total['jobs']:,} jobs, makespan {total['makespan_s']:,} s vs capacity bound "
        f"{total['capacity_bound_s']:,} s, wait p50 {total['wait_p50_s']} s p99 "
        f"{total['wait_p99_s']} s, {total['preemptions']:,} preemptions, "
        f"simulated in {total['wall_s']} s\n"
    )


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = _parser().parse_args(argv)
    if args.tick is not None and not args.tick > 0:
        err.write("--tick must be a positive number of seconds\n")
        return 2
    try:
        workload, policy = _workload_and_policy(args)
    except WorkloadError as error:
        err.write(f"error: {error}\n")
        return 2
    err.write(f"simulating {workload.name}: {workload.job_count:,} jobs\n")
    try:
        without, result = _simulated(workload, policy, args, err)
    except InvariantViolation as error:
        err.write(f"a plan broke an invariant: {error}\n")
        return 1
    _print_human(result, out)
    body = dict(result.summary, workload=workload.name, notes=list(workload.notes))
    if without is not None:
        out.write("\n".join(comparison_lines(without.queue_summaries, result.queue_summaries)))
        out.write("\n")
        body["queues_with_fair_share"] = result.queue_summaries
        body["queues_without_fair_share"] = without.queue_summaries
    if args.estimates:
        err.write("measuring start-time estimates against the replay\n")
        body["estimates"] = _estimates(workload, out)
    if args.json:
        out.write(json.dumps(body, separators=(",", ":")) + "\n")
    return 0


def _workload_and_policy(args):
    """The workload the arguments name, configured and scaled, and its fair-share policy
    (None without --fair-share); WorkloadError says what to fix."""
    workload = _load(args)
    if args.config:
        workload = apply_config(workload, args.config)
    if args.scale is not None:
        if not 0 < args.scale <= 1000:
            raise WorkloadError("--scale must be a number above 0 and at most 1000")
        workload = scaled(workload, args.scale)
    fair = args.fair_share is not None
    if args.compare and not fair:
        raise WorkloadError("--compare needs --fair-share HALF_LIFE")
    return workload, policy_from(args.fair_share, args.fair_share_counts) if fair else None


def _simulated(workload, policy, args, err):
    """The run without fair share (with --compare, else None), then the run asked for."""

    def run(what):
        return simulate(what, tick_s=args.tick, check=not args.no_check, progress=_Progress(err))

    without = None
    if args.compare:
        err.write("first without fair share\n")
        without = run(workload)
        err.write(f"then with fair share (half-life {args.fair_share})\n")
    return without, run(with_policy(workload, policy))


def _estimates(workload, out) -> list[dict]:
    """Each queue's start-time estimates measured against the replay, printed and returned."""
    accuracy = [estimate_accuracy(queue) for queue in workload.queues]
    for queue, figures in zip(workload.queues, accuracy, strict=True):
        out.write(
            f"estimates in {queue.config.name}: {figures['estimates']:,} made, error p50 "
            f"{figures['error_p50_s']} s p90 {figures['error_p90_s']} s, the range held "
            f"the real start {_percent(figures['inside_range'])} "
            f"({figures['uncertain']:,} said uncertain), median width "
            f"{figures['range_width_p50_s']} s for a median expected wait of "
            f"{figures['expected_wait_p50_s']} s; once every job had arrived "
            f"p50 {figures['error_after_last_arrival_p50_s']} s p90 "
            f"{figures['error_after_last_arrival_p90_s']} s, range held "
            f"{_percent(figures['inside_range_after_last_arrival'])}\n"
        )
    return accuracy


def _percent(fraction: float | None) -> str:
    return "—" if fraction is None else f"{100 * fraction:.1f} %"


if __name__ == "__main__":
    sys.exit(main())
