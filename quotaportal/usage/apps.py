from __future__ import annotations

from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "quotaportal.usage"
    label = "usage"
    verbose_name = "Usage accounting"

    def ready(self) -> None:
        from quotaportal.usage import tasks  # noqa: F401  (registers the Celery task)
