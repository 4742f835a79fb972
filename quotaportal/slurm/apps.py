from __future__ import annotations

from django.apps import AppConfig


class SlurmConfig(AppConfig):
    name = "quotaportal.slurm"
    label = "slurm"
    verbose_name = "Slurm clusters"

    def ready(self) -> None:
        from quotaportal.quotas.backends import register
        from quotaportal.quotas.models import Backend
        from quotaportal.slurm.backend import SlurmBackend

        register(Backend.SLURM, SlurmBackend())
