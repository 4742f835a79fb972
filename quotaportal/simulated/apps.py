from __future__ import annotations

from django.apps import AppConfig


class SimulatedConfig(AppConfig):
    name = "quotaportal.simulated"
    label = "simulated"
    verbose_name = "Simulated backend"

    def ready(self) -> None:
        from quotaportal.quotas.backends import register
        from quotaportal.quotas.models import Backend
        from quotaportal.simulated.backend import SimulatedBackend

        register(Backend.SIMULATED, SimulatedBackend())
