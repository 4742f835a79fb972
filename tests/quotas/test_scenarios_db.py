"""Every shared scenario plays through services + PostgreSQL + tick and agrees with the pure run."""

from __future__ import annotations

import pytest

from quotaportal.whatif.replays.scenario_world import DbWorld
from scheduler.scenarios import PureWorld, load, play
from tests.builders import every_scenario_file


@pytest.mark.django_db
@pytest.mark.parametrize("path", every_scenario_file(), ids=lambda p: p.stem)
def test_shared_scenario_passes_through_the_control_plane_and_agrees(path):
    scenario = load(path)
    through_db = [r.line() for r in play(scenario, DbWorld(scenario))]
    pure = [r.line() for r in play(scenario, PureWorld.of(scenario))]
    assert [line for line in through_db if not line.startswith("PASS")] == []
    assert through_db == pure
