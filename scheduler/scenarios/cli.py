"""The command line shared by the pure runner and the control plane's run_scenario command."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scheduler.scenarios.format import Scenario, ScenarioError, load
from scheduler.scenarios.runner import play
from scheduler.scenarios.world import World


def run_files(
    paths: Iterable[str], make_world: Callable[[Scenario], World], emit: Callable[[str], None]
) -> int:
    """Play each file, print a line per expectation and a summary; return the exit status."""
    passed = failed = 0
    malformed = False
    for path in paths:
        try:
            scenario = load(path)
        except ScenarioError as err:
            emit(f"ERROR {err}")
            malformed = True
            continue
        for result in play(scenario, make_world(scenario)):
            emit(result.line())
            passed += result.passed
            failed += not result.passed
    emit(f"{passed} passed, {failed} failed")
    return 1 if failed or malformed or passed == 0 else 0
