"""The benchmark and the demo run and report what they claim (figures are not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

from scheduler import check_plan, plan_tick
from scheduler.bench import synthetic_snapshot


def run(repo, *args):
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, cwd=repo, check=False
    )


def test_bench_json_reports_every_figure(repo):
    done = run(
        repo,
        "scheduler.bench",
        "--json",
        "--runnable",
        "400",
        "--dispatched",
        "80",
        "--shares",
        "12",
        "--units",
        "3",
        "--repeat",
        "1",
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert {"runnable", "dispatched", "shares", "units", "plan_ms", "sort_ms", "ratio"} <= set(
        figures
    )
    assert (figures["runnable"], figures["dispatched"], figures["shares"]) == (400, 80, 12)
    assert figures["plan_ms"] > 0
    assert figures["sort_ms"] > 0
    assert figures["ratio"] > 0
    assert figures["explained_ms"] > 0


def test_bench_rejects_nonsense_sizes(repo):
    done = run(repo, "scheduler.bench", "--shares", "0")
    assert done.returncode == 2
    assert "sizes must be positive" in done.stderr


def test_synthetic_snapshot_is_seeded_and_plans_cleanly():
    first = synthetic_snapshot(300, 60, 10, 3, seed=3)
    assert first == synthetic_snapshot(300, 60, 10, 3, seed=3)
    check_plan(first, plan_tick(first, 5000.0))


def test_demo_tells_the_walkthrough_and_every_check_holds(repo):
    done = run(repo, "scheduler.demo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preempt qs1_job_med (cross-share, reclaiming lent capacity)" in done.stdout
    assert "preempt qs1_job_high (in-share, for a higher priority job)" in done.stdout
    assert done.stdout.rstrip().endswith("every check held ==")


def test_demo_reports_a_missing_file(repo, tmp_path):
    done = run(repo, "scheduler.demo", str(tmp_path / "nope.json"))
    assert done.returncode == 2
    assert "cannot read" in done.stderr
