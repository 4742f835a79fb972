from __future__ import annotations

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    name = "quotaportal.quotas"
    label = "quotas"
    verbose_name = "Quota management"
