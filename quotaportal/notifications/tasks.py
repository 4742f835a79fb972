"""Entry points: the Celery tasks, and the in-process sender of the embedded default.

Loading this module (the app's ready does) registers `after_commit` as the tick's
publisher: a transaction that wrote audit events asks for a delivery round once it commits.
With a broker that is a Celery task (one queued at a time); without one (the embedded
default, REDIS_URL unset) the server's sender thread does the round, never the request that
made the change. The beat's sweep is the safety net for both: retries that fell due, a
worker killed mid-round, a broker that was down when the change committed.
"""

from __future__ import annotations

import logging
import threading
import time

from celery import shared_task
from django.conf import settings
from django.db import close_old_connections, connection

from quotaportal.infra import redis_client
from quotaportal.notifications import outbox, sending
from quotaportal.tick import changes

log = logging.getLogger(__name__)
QUEUED_KEY = "notifications-queued"
# At most one round asked for by commits per this long: under a stream of submits a round
# per commit would keep a worker busy publishing a few events at a time. An event waits at
# most this long (plus the round) before it is sent.
ROUND_SPACING_MS = 1000


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
        self.stopping = threading.Event()

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.woken.set()
        self.join(timeout)

    def run(self) -> None:
        while not self.stopping.is_set():
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


def start_in_process() -> InProcessSender:
    """The embedded server's sender (the demo starts it beside its scheduler loop). Other
    processes without a broker (a management command) only write their events: the server's
    sender finds them at its next sweep."""
    global _in_process
    _in_process = InProcessSender()
    _in_process.start()
    return _in_process


_last_asked = float("-inf")


def after_commit() -> None:
    """Events committed: a delivery round soon, without making the caller wait for it."""
    if not settings.QP_NOTIFY_AFTER_COMMIT:
        return
    if deliver_notifications.app.conf.task_always_eager:
        if _in_process is not None:
            _in_process.woken.set()
        return
    global _last_asked
    now = time.monotonic()
    if now - _last_asked < ROUND_SPACING_MS / 1000:
        return  # this process asked within the spacing: that round is still to come
    _last_asked = now
    try:
        store = redis_client.client(settings.REDIS_URL)
        if store.set(redis_client.key(QUEUED_KEY), 1, nx=True, px=ROUND_SPACING_MS):
            deliver_notifications.apply_async(countdown=ROUND_SPACING_MS / 1000)
    except Exception:  # the change has committed; the beat's sweep delivers its events
        log.warning("could not queue a notification round; the next sweep delivers it")


changes.use_publisher(after_commit)
