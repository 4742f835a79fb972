from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "quotaportal.api"
    label = "api"
    verbose_name = "REST API"

    def ready(self) -> None:
        from quotaportal.api import authentication

        authentication.connect_signals()
