"""A what-if replay: a draft of a queue's share settings compared with today's on a workload."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from quotaportal.quotas.models.resources import JobQueue


class WhatIfStatus(models.TextChoices):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"
    APPLIED = "APPLIED"
    DISCARDED = "DISCARDED"


class WhatIfSource(models.TextChoices):
    HISTORY = "history", "this queue's recent jobs"
    TRACE = "trace", "the Alibaba openb trace, mapped onto this queue"


class WhatIf(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job_queue = models.ForeignKey(JobQueue, on_delete=models.CASCADE, related_name="what_ifs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # {"capacity": {unit: n}, "shares": [{name, limits, strategy, borrow_limit,
    #   in_share_preemption, state, team (new shares), remove}]}: the queue as drafted.
    draft = models.JSONField()
    # Why the draft says what it says, a line each, when the portal drafted it (limits
    # suggested from a period's use); empty for an admin's own draft.
    reasons = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16, choices=WhatIfSource.choices)
    since_hours = models.PositiveIntegerField(default=168)
    status = models.CharField(max_length=10, choices=WhatIfStatus.choices, default="QUEUED")
    progress = models.FloatField(default=0.0)  # 0..1 of both replays
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"what-if on {self.job_queue_id} at {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def finished(self) -> bool:
        return self.status not in (WhatIfStatus.QUEUED, WhatIfStatus.RUNNING)
