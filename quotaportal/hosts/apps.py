from __future__ import annotations

from django.apps import AppConfig


class HostsConfig(AppConfig):
    name = "quotaportal.hosts"
    label = "hosts"
    verbose_name = "GPU hosts"

    def ready(self) -> None:
        from quotaportal.hosts.backend import LocalBackend
        from quotaportal.quotas.backends import register
        from quotaportal.quotas.models import Backend

        register(Backend.LOCAL, LocalBackend())
