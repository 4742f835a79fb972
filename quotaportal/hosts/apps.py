from __future__ import annotations

from django.apps import AppConfig


class HostsConfig(AppConfig):
    name = "quotaportal.hosts"
    label = "hosts"
    verbose_name = "GPU hosts"
