"""Every shared scenario file plays through the pure scheduler with every expectation met."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from scheduler.scenarios import PureWorld, ScenarioError, load, play
from scheduler.scenarios.format import parse
from tests.builders import every_scenario_file, scenario_files


def pure_world(scenario):
    return PureWorld.of(scenario)


@pytest.mark.parametrize("path", every_scenario_file(), ids=lambda p: p.stem)
def test_shared_scenario_passes_through_the_pure_scheduler(path):
    scenario = load(path)
    results = list(play(scenario, pure_world(scenario)))
    failures = [r.line() for r in results if not r.passed]
    assert results, "a scenario with no expectations proves nothing"
    assert failures == []


def test_runner_cli_prints_a_line_per_expectation_and_a_summary(repo):
    files = [str(p) for p in scenario_files()]
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.scenarios", *files],
        capture_output=True,
        text=True,
        cwd=repo,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("PASS ") for line in lines[:-1])
    assert lines[-1] == f"{len(lines) - 1} passed, 0 failed"


def write(tmp_path, data, name="s.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


BASE = {
    "capacity": {"gpu": 1},
    "shares": [{"name": "A", "limits": {"gpu": 1}, "strategy": "LEND"}],
}


def test_a_wrong_expectation_is_reported_as_fail_with_what_was_seen(tmp_path, repo):
    path = write(
        tmp_path,
        {
            **BASE,
            "steps": [
                {"submit": {"job": "a", "share": "A", "unit": "gpu"}},
                {"tick": {}},
                {"expect": {"runnable": ["a"]}},
            ],
        },
    )
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.scenarios", str(path)],
        capture_output=True,
        text=True,
        cwd=repo,
        check=False,
    )
    assert done.returncode == 1
    assert "FAIL" in done.stdout
    assert "expected ['a'], got []" in done.stdout
    assert done.stdout.strip().endswith("0 passed, 1 failed")


def test_a_malformed_file_names_the_file_and_the_step(tmp_path, repo):
    path = write(tmp_path, {**BASE, "steps": [{"tick": {}}, {"sumbit": {"job": "a"}}]})
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.scenarios", str(path)],
        capture_output=True,
        text=True,
        cwd=repo,
        check=False,
    )
    assert done.returncode == 1
    assert f"{path}: step 2: unknown step 'sumbit'" in done.stdout


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "must hold one JSON object"),
        ({**BASE, "steps": [], "colour": 1}, "unknown field(s) colour"),
        ({"capacity": {"gpu": 1}, "steps": []}, "missing 'shares'"),
        ({**BASE, "steps": [{"submit": {"job": "a"}}]}, "step 1: submit needs share, unit"),
        ({**BASE, "steps": [{"tick": {}, "expect": {}}]}, "exactly one key"),
        ({**BASE, "steps": [{"finish": {"job": "a", "status": "DONE"}}]}, "SUCCEEDED or FAILED"),
        ({**BASE, "ordering": "RANDOM", "steps": []}, "STRICT or BEST_EFFORT"),
        (
            {
                "capacity": {"gpu": 1},
                "steps": [],
                "shares": [
                    {"name": "A", "limits": {"gpu": 1}, "strategy": "LEND", "borrow_limit": 5}
                ],
            },
            "borrow_limit is only allowed with LEND_AND_BORROW",
        ),
    ],
)
def test_malformed_scenarios_are_rejected_with_a_clear_message(data, message):
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(data, "x.json")


def test_a_submission_rejected_unexpectedly_is_a_failure():
    scenario = parse(
        {
            **BASE,
            "steps": [
                {"submit": {"job": "a", "share": "A", "unit": "gpu", "quantity": 2}},
            ],
        },
        "x.json",
    )
    (result,) = play(scenario, pure_world(scenario))
    assert not result.passed
    assert "can use at most 1 (its limit, as LEND never borrows)" in result.detail


def test_preemption_retries_exhausted_fails_the_job():
    scenario = parse(
        {
            "capacity": {"gpu": 2},
            "shares": [
                {"name": "A", "limits": {"gpu": 1}, "strategy": "LEND_AND_BORROW"},
                {"name": "B", "limits": {"gpu": 1}, "strategy": "LEND"},
            ],
            "steps": [
                {"submit": {"job": "a1", "share": "A", "unit": "gpu"}},
                {"submit": {"job": "a2", "share": "A", "unit": "gpu", "preemption_retries": 0}},
                {"tick": {}},
                {"submit": {"job": "b1", "share": "B", "unit": "gpu"}},
                {"tick": {}},
                {
                    "expect": {
                        "failed": ["a2"],
                        "preempted_cross_share": ["a2"],
                        "preempted_count": {"a2": 1},
                        "dispatched": ["a1", "b1"],
                    }
                },
            ],
        },
        "x.json",
    )
    results = list(play(scenario, pure_world(scenario)))
    assert [r.line() for r in results if not r.passed] == []
    assert len(results) == 4


def test_updating_a_share_checks_aws_rules():
    scenario = parse(
        {
            **BASE,
            "steps": [
                {"update_share": {"share": "A", "borrow_limit": 50}},
                {"update_share": {"share": "A", "limits": {}}},
            ],
        },
        "x.json",
    )
    results = list(play(scenario, pure_world(scenario)))
    assert [r.passed for r in results] == [False, False]
    assert "borrow_limit applies only to the LEND_AND_BORROW strategy" in results[0].detail
    assert "between 1 and 5 capacity limits" in results[1].detail
