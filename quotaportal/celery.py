"""The Celery app: `celery -A quotaportal worker` and exactly one `celery -A quotaportal beat`."""

from __future__ import annotations

import os

from celery import Celery, bootsteps

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "quotaportal.settings")

app = Celery("quotaportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
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
