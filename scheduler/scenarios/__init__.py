"""Scenario files: parse them, play them against a world, report each expectation."""

from __future__ import annotations

from scheduler.scenarios.format import Scenario, ScenarioError, load
from scheduler.scenarios.runner import Result, play
from scheduler.scenarios.world import Observation, PureWorld, StepRejected, World

__all__ = [
    "Observation",
    "PureWorld",
    "Result",
    "Scenario",
    "ScenarioError",
    "StepRejected",
    "World",
    "load",
    "play",
]
