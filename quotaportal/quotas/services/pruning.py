"""Pruning what is kept only for a while: scheduler runs, utilization samples, jobs' output."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Window
from django.db.models.functions import RowNumber, TruncMinute
from django.utils import timezone

from quotaportal.jobs.output import forget_old_output
from quotaportal.quotas.models import SchedulerRun, UtilizationSample

# Samples younger than this are all kept (the 15-minute and hour charts draw each change);
# older ones are thinned to the last of each minute, which is all a day's or a week's chart
# can draw.
EVERY_SAMPLE_KEPT = timedelta(hours=1)


def prune_history() -> None:
    """Scheduler runs older than QP_HISTORY_HOURS go; utilization samples older than
    QP_CHART_HOURS go, and those older than an hour are thinned to one a minute; jobs' output
    older than QP_OUTPUT_RETENTION_DAYS goes."""
    now = timezone.now()
    SchedulerRun.objects.filter(
        started_at__lt=now - timedelta(hours=settings.QP_HISTORY_HOURS)
    ).delete()
    oldest = now - timedelta(hours=settings.QP_CHART_HOURS)
    UtilizationSample.objects.filter(time__lt=oldest).delete()
    thin_samples(oldest, now - EVERY_SAMPLE_KEPT)
    forget_old_output(now)


def thin_samples(since, until) -> int:
    """Keep, per queue and minute between `since` and `until`, only the last sample; how
    many went."""
    ranked = (
        UtilizationSample.objects.filter(time__gte=since, time__lt=until)
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("job_queue_id"), TruncMinute("time")],
                order_by=F("time").desc(),
            )
        )
        .filter(rank__gt=1)
        .values_list("id", flat=True)
    )
    extra = list(ranked)
    for start in range(0, len(extra), 5000):
        UtilizationSample.objects.filter(pk__in=extra[start : start + 5000]).delete()
    return len(extra)
