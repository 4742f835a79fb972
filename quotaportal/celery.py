"""The Celery app: `celery -A quotaportal worker` and exactly one `celery -A quotaportal beat`."""

from __future__ import annotations

import os

from celery import Celery, bootsteps, signals
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "quotaportal.settings")

app = Celery("quotaportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fixup closes the database connection around every task unless this is set
# (then every this many tasks): a tick would start a new PostgreSQL backend, with cold caches
# and none of its prepared statements. Connections live by CONN_MAX_AGE instead, as a web
# request's do (close_obsolete_connections).
app.conf.CELERY_DB_REUSE_MAX = 10_000
app.autodiscover_tasks()


class WorkerAlive(bootsteps.StartStopStep):
    """Every few seconds, a worker tells /healthz it is alive (quotaportal.infra.worker_health)."""

    requires = {"celery.worker.components:Timer"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.timer_ref = None

    def start(self, worker):
        from quotaportal.infra.worker_health import BEAT_SECONDS, record_worker_alive

        # The queues -Q and -X left it (every declared one without them).
        queues = sorted(worker.app.amqp.queues.consume_from)
        record_worker_alive(worker.hostname, queues)
        self.timer_ref = worker.timer.call_repeatedly(
            BEAT_SECONDS, record_worker_alive, (worker.hostname, queues), priority=10
        )

    def stop(self, worker):
        if self.timer_ref is not None:
            self.timer_ref.cancel()
            self.timer_ref = None


app.steps["worker"].add(WorkerAlive)


@signals.task_prerun.connect
@signals.task_postrun.connect
def close_obsolete_connections(sender=None, **kwargs) -> None:
    """Around each task a worker runs, as around a web request: a connection past
    CONN_MAX_AGE, or left unusable by an error (the database restarted), is closed, and the
    next query opens a new one; a sound one is kept for the next task
    (CELERY_DB_REUSE_MAX above). A task run inline (eager) is part of its caller's work,
    maybe inside its transaction: its connection is the caller's."""
    if not getattr(sender.request, "is_eager", False):
        close_old_connections()
