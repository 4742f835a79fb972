from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "quotaportal.api"
    label = "api"
    verbose_name = "REST API"
