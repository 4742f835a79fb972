"""Pruning what is kept only for a while: scheduler runs and utilization samples."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from quotaportal.quotas.models import SchedulerRun, UtilizationSample


def prune_history() -> None:
    """Scheduler runs and utilization samples older than QP_HISTORY_HOURS go."""
    cutoff = timezone.now() - timedelta(hours=settings.QP_HISTORY_HOURS)
    SchedulerRun.objects.filter(started_at__lt=cutoff).delete()
    UtilizationSample.objects.filter(time__lt=cutoff).delete()
