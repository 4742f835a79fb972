"""Whether a Celery worker is alive, for /healthz: each worker writes a Redis key every few
seconds (a bootstep in quotaportal.celery), and one per task queue it takes (the ticks', the
long tasks'), which expire when no worker has written them.

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


def queue_key(queue: str) -> str:
    return redis_client.key(f"celery-worker-alive:{queue}")


def record_worker_alive(hostname: str, queues: list[str] | None = None) -> None:
    """Called by every worker every BEAT_SECONDS, with the task queues it takes (None: every
    one, as a worker given no -Q or -X does); a broker outage only skips a beat."""
    taken = settings.CELERY_TASK_QUEUES if queues is None else queues
    try:
        pipe = client(settings.REDIS_URL, timeout=1.0).pipeline(transaction=False)
        pipe.set(key(), hostname, ex=SILENT_AFTER_SECONDS)
        for queue in taken:
            pipe.set(queue_key(queue), hostname, ex=SILENT_AFTER_SECONDS)
        pipe.execute()
    except Exception as err:  # the worker must outlive any Redis trouble
        log.warning("could not record that this worker is alive: %s", err)


def broker_problem() -> str | None:
    """Why the broker or the workers are not fit to run ticks and the long tasks; None when
    they are (and always without REDIS_URL, where tasks run in the web process)."""
    if not settings.REDIS_URL:
        return None
    queues = list(settings.CELERY_TASK_QUEUES)
    try:
        pipe = client(settings.REDIS_URL, timeout=1.0).pipeline(transaction=False)
        for name in (key(), *map(queue_key, queues)):
            pipe.exists(name)
        alive, *taken = pipe.execute()
    except Exception as err:
        return f"the broker (Redis) does not answer: {type(err).__name__}"
    if not alive:
        return (
            f"no Celery worker has reported for over {SILENT_AFTER_SECONDS} s; is "
            "`celery -A quotaportal worker` running?"
        )
    idle = [queue for queue, ok in zip(queues, taken, strict=True) if not ok]
    if idle:
        return (
            f"no Celery worker has taken the {', '.join(idle)} tasks for over "
            f"{SILENT_AFTER_SECONDS} s; is `celery -A quotaportal worker -Q {','.join(idle)}` "
            "running?"
        )
    return None
