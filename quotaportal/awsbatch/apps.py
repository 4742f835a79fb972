from __future__ import annotations

from django.apps import AppConfig


class AwsBatchConfig(AppConfig):
    name = "quotaportal.awsbatch"
    label = "awsbatch"
    verbose_name = "AWS Batch"
