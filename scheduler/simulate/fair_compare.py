"""A workload replayed with a fair-share policy and without, side by side: per share the
borrowed instance-hours and wait p90, per queue the Jain index of borrowed hours
(`python -m scheduler.simulate … --fair-share 7d --compare`)."""

from __future__ import annotations

import re
from dataclasses import replace

from scheduler.fairshare import Counts, Policy
from scheduler.simulate.workload import Workload, WorkloadError

_SPAN = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_HALF_LIFE = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")


def parse_half_life(text: str) -> float:
    """'7d', '12h', '30m', '90s' or plain seconds."""
    found = _HALF_LIFE.fullmatch(text.strip())
    if not found or float(found[1]) <= 0:
        raise WorkloadError(
            f"--fair-share takes a half-life such as 7d, 12h, 30m or 3600 (seconds), not {text!r}"
        )
    return float(found[1]) * _SPAN[found[2] or "s"]


def with_policy(workload: Workload, policy: Policy | None) -> Workload:
    """Every queue of the workload under `policy` (None: without one)."""
    queues = tuple(
        replace(queue, config=replace(queue.config, fair_share=policy)) for queue in workload.queues
    )
    return replace(workload, queues=queues)


def policy_from(half_life: str, counts: str) -> Policy:
    return Policy(parse_half_life(half_life), Counts(counts))


def comparison_lines(off: list[dict], on: list[dict]) -> list[str]:
    """Per queue, its shares that borrowed or may: borrowed hours and wait p90 both ways."""
    lines = []
    for before, after in zip(off, on, strict=True):
        lines.append(
            f"queue {before['queue']}: Jain index of borrowed hours {_figure(before, 'jain')} "
            f"without fair share, {_figure(after, 'jain')} with; wait p90 "
            f"{before['wait_p90_s']} s → {after['wait_p90_s']} s, makespan "
            f"{before['makespan_s']:,} s → {after['makespan_s']:,} s"
        )
        lines.append(
            f"  {'share':<20} {'borrowed h off':>14} {'on':>10} {'wait p90 s off':>15} {'on':>10}"
        )
        for name, share in before["shares"].items():
            other = after["shares"][name]
            if not (share["borrowed_hours"] or other["borrowed_hours"]):
                continue
            lines.append(
                f"  {name:<20} {share['borrowed_hours']:>14,.1f} {other['borrowed_hours']:>10,.1f} "
                f"{_seconds(share['wait_p90_s']):>15} {_seconds(other['wait_p90_s']):>10}"
            )
    return lines


def _figure(summary: dict, name: str) -> str:
    value = summary.get("borrowed_hours_jain") if name == "jain" else summary.get(name)
    return "—" if value is None else f"{value:.3f}"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"
