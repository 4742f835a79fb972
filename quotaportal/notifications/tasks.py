"""Entry points: the Celery tasks, and the in-process sender of the embedded default.

Loading this module (the app's ready does) registers `after_commit` as the ticking layer's
publisher: a transaction that wrote audit events asks for a delivery round once it commits.
With a broker that is a Celery task (one queued at a time); without one (the embedded
default, REDIS_URL unset) a thread of this process does the round, never the request that
made the change. The beat's sweep is the safety net for both: retries that fell due, a
worker killed mid-round, a broker that was down when the change committed.
"""

from __future__ import annotations

import logging
import threading

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, connection

from quotaportal.infra import redis_client
from quotaportal.notifications import outbox, sending
from quotaportal.quotas.ticking import changes

log = logging.getLogger(__name__)
QUEUED_KEY = "notifications-queued"
QUEUED_SECONDS = 10  # a queued round no worker took for this long is asked for again


def deliver_round(send_each=None) -> None:
    """Publish what committed, then send what is due: each webhook's deliveries by
    `send_each(webhook_id)` (a task per webhook with a broker, inline without), then e-mail."""
    outbox.publish()
    for webhook_id in sending.webhooks_due():
        (send_each or sending.send_webhook)(webhook_id)
    sending.send_emails()


@shared_task(ignore_result=True)
def deliver_notifications() -> None:
    """A delivery round: after a commit that wrote events, and on the beat."""
    if settings.REDIS_URL:
        redis_client.client(settings.REDIS_URL).delete(redis_client.key(QUEUED_KEY))
    deliver_round(send_each=deliver_to_webhook.delay)


@shared_task(ignore_result=True)
def deliver_to_webhook(webhook_id: int) -> None:
    """One webhook's due deliveries, in order (another worker already on it: nothing)."""
    sending.send_webhook(webhook_id)


class InProcessSender(threading.Thread):
    """The embedded default's sender: a round when woken after a commit, and every
    QP_NOTIFY_SWEEP_SECONDS for retries."""

    def __init__(self):
        super().__init__(name="quotaportal-notifications", daemon=True)
        self.woken = threading.Event()

    def run(self) -> None:
        while True:
            self.woken.wait(settings.QP_NOTIFY_SWEEP_SECONDS)
            self.woken.clear()
            close_old_connections()
            try:
                deliver_round()
            except Exception:  # a failing round must not stop the sender; the next retries
                log.exception("notification round failed")
            finally:
                connection.close()


_in_process: InProcessSender | None = None
_in_process_lock = threading.Lock()


def wake_in_process() -> None:
    global _in_process
    with _in_process_lock:
        if _in_process is None or not _in_process.is_alive():
            _in_process = InProcessSender()
            _in_process.start()
    _in_process.woken.set()


def after_commit() -> None:
    """Events committed: a delivery round soon, without making the caller wait for it."""
    if not settings.QP_NOTIFY_AFTER_COMMIT:
        return
    if deliver_notifications.app.conf.task_always_eager:
        wake_in_process()
        return
    try:
        store = redis_client.client(settings.REDIS_URL)
        if store.set(redis_client.key(QUEUED_KEY), 1, nx=True, ex=QUEUED_SECONDS):
            deliver_notifications.delay()
    except Exception:  # the change has committed; the beat's sweep delivers its events
        log.warning("could not queue a notification round; the next sweep delivers it")


changes.use_publisher(after_commit)
