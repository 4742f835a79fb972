from __future__ import annotations

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotaportal.quotas"
    label = "quotas"
    verbose_name = "Quota management"

    def ready(self) -> None:
        from quotaportal.quotas import config_cache

        config_cache.connect_signals()
        # The Celery entry points register themselves as the tick's sender: the one
        # place below the tasks that loads them (an import contract says so).
        from quotaportal.quotas import tasks  # noqa: F401
