"""The Celery app: `celery -A quotaportal worker` and exactly one `celery -A quotaportal beat`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "quotaportal.settings")

app = Celery("quotaportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
