"""A job's whole output, per attempt and rank, as its backend streams it in: chunks of bytes
at their offsets in the rank's output, the last one marked `final` once the rank has ended
and everything it printed has arrived (jobs.output)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from quotaportal.quotas.models.jobs import JobAttempt


class OutputChunk(models.Model):
    id = models.BigAutoField(primary_key=True)
    attempt = models.ForeignKey(
        JobAttempt, on_delete=models.CASCADE, related_name="output_chunks", db_index=False
    )
    rank = models.PositiveIntegerField(default=0)
    offset = models.BigIntegerField()  # of its first byte in the rank's output
    length = models.PositiveIntegerField()  # len(data), kept so reads need not fetch data
    data = models.BinaryField()
    # The rank ended and nothing follows this chunk (which may be empty).
    final = models.BooleanField(default=False)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["attempt", "rank", "offset"]
        constraints = [
            models.UniqueConstraint(
                fields=["attempt", "rank", "offset"], name="output_chunk_unique"
            ),
            models.CheckConstraint(condition=Q(offset__gte=0), name="output_offset_positive"),
        ]
        indexes = [
            # Retention deletes by age (jobs.output.forget_old_output).
            models.Index(fields=["received_at"], name="output_received"),
        ]
