"""What the ticks remember of a job queue between them: one row per queue, written by the
tick alone (and by the fair-share service when it resets the account). A queue no tick has
planned has none: it reads as a fresh memo (TickMemo.of), so the first tick plans it whole."""

from __future__ import annotations

from django.db import models

from quotaportal.quotas.models.resources import JobQueue


class TickMemoQuerySet(models.QuerySet):
    def remember(self, queue_id: int, **fields) -> None:
        """These fields of the queue's memo, in one statement whether or not it has a row
        yet (INSERT … ON CONFLICT DO UPDATE on both databases)."""
        if fields:
            self.bulk_create(
                [TickMemo(queue_id=queue_id, **fields)],
                update_conflicts=True,
                unique_fields=["queue"],
                update_fields=list(fields),
            )


class TickMemo(models.Model):
    queue = models.OneToOneField(
        JobQueue, on_delete=models.CASCADE, primary_key=True, related_name="tick_memo"
    )
    # The plan it last settled: a tick that finds the queue's state_version, its capacity and
    # its dispatched-job count as they were then, and no job without a pending reason (a new
    # submit), skips planning.
    planned_version = models.BigIntegerField(default=-1)
    planned_dispatched_jobs = models.IntegerField(null=True, blank=True)
    planned_at = models.DateTimeField(null=True, blank=True)
    planned_capacity = models.JSONField(null=True, blank=True)  # hosts come and go unannounced
    # When a tick last read every active job (ticks between read the heads of each share's
    # line), and a digest of the share terms and ordering it planned with: new terms may
    # change the pending reason of any waiting job, so they bring a full plan.
    fully_planned_at = models.DateTimeField(null=True, blank=True)
    planned_terms = models.CharField(max_length=64, blank=True)
    # How many jobs waited at that full plan: a queue too short for its shares is read whole
    # every tick (tick.bridge.heads_pay_off: reading the heads costs more than it saves there).
    fully_planned_waiting = models.IntegerField(null=True, blank=True)
    # The utilization sample ticks last wrote (UtilizationSample), so a tick compares usage
    # without reading the history.
    sampled_used = models.JSONField(null=True, blank=True)
    sampled_at = models.DateTimeField(null=True, blank=True)
    # Fair share over time: share -> [decayed use, as of (epoch s), instances since].
    fair_use = models.JSONField(default=dict, blank=True)

    objects = TickMemoQuerySet.as_manager()

    def __str__(self) -> str:
        return f"tick memo of queue {self.queue_id}"

    @staticmethod
    def of(queue: JobQueue) -> TickMemo:
        """The queue's memo (read with it where the caller used select_related), or a fresh
        one when no tick has written it yet."""
        try:
            return queue.tick_memo
        except TickMemo.DoesNotExist:
            return TickMemo(queue_id=queue.pk)
