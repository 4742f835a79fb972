"""The SIMULATED backend: dispatched jobs run from the next tick and end after their
simulated duration; capacity is the environment's max_capacity."""

from __future__ import annotations

from quotaportal.quotas.backends import EnvironmentBackend
from quotaportal.quotas.services.lifecycle import progress_simulated


class SimulatedBackend(EnvironmentBackend):
    def advance(self, queue, now) -> None:
        progress_simulated(queue.id, now)
