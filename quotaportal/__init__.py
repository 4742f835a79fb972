"""quotaportal: the Django project. Importing it loads the Celery app (Celery's Django recipe)."""

from __future__ import annotations

from quotaportal.celery import app as celery_app

__all__ = ["celery_app"]
