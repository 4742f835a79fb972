"""Whether a Celery worker is alive, for /healthz: each worker writes a Redis key every few
seconds (a bootstep in quotaportal.celery), which expires when no worker has written it.

Queues' recent ticks do not tell: agents tick their queue inline when their jobs change, so
ticks stay fresh while the worker is dead and submits' ticks pile up in the broker.
"""

from __future__ import annotations

import logging

from django.conf import settings

from quotaportal.infra import redis_client
from quotaportal.infra.redis_client import client

log = logging.getLogger(__name__)

BEAT_SECONDS = 5.0
SILENT_AFTER_SECONDS = 30


def key() -> str:
    return redis_client.key("celery-worker-alive")


def record_worker_alive(hostname: str) -> None:
    """Called by every worker every BEAT_SECONDS; a broker outage only skips a beat."""
    try:
        client(settings.REDIS_URL, timeout=1.0).set(key(), hostname, ex=SILENT_AFTER_SECONDS)
    except Exception as err:  # the worker must outlive any Redis trouble
        log.warning("could not record that this worker is alive: %s", err)


def broker_problem() -> str | None:
    """Why the broker or the workers are not fit to run ticks; None when they are (and
    always without REDIS_URL, where tasks run in the web process)."""
    if not settings.REDIS_URL:
        return None
    try:
        alive = client(settings.REDIS_URL, timeout=1.0).exists(key())
    except Exception as err:
        return f"the broker (Redis) does not answer: {type(err).__name__}"
    if not alive:
        return (
            f"no Celery worker has reported for over {SILENT_AFTER_SECONDS} s; is "
            "`celery -A quotaportal worker` running?"
        )
    return None
