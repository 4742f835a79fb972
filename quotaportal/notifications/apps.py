from __future__ import annotations

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "quotaportal.notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # The Celery entry points register themselves as the tick's publisher.
        from quotaportal.notifications import tasks  # noqa: F401
