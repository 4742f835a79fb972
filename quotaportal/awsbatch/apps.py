from __future__ import annotations

from django.apps import AppConfig


class AwsBatchConfig(AppConfig):
    name = "quotaportal.awsbatch"
    label = "awsbatch"
    verbose_name = "AWS Batch"

    def ready(self) -> None:
        from quotaportal.awsbatch.sync.backend import AwsBatchBackend
        from quotaportal.quotas.backends import register
        from quotaportal.quotas.models import Backend

        register(Backend.AWS_BATCH, AwsBatchBackend())
