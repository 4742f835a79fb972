"""Making deliveries: webhooks POSTed in order, signed, retried with backoff; e-mail sent
through Django's e-mail backend. A delivery is marked DELIVERED only after it was accepted,
so a sender killed mid-way sends it again (at least once)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from datetime import timedelta

import requests
from django.conf import settings
from django.core.mail import send_mail
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from quotaportal.infra.locks import session_lock
from quotaportal.notifications.models import Delivery, DeliveryStatus, Webhook

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Quotaportal-Signature"
CONNECT_TIMEOUT = 3.05


def send_budget() -> float:
    """How long one sender keeps at one webhook before it lets the others have a turn."""
    return 3.0 * settings.QP_WEBHOOK_TIMEOUT


def lease_seconds() -> float:
    """How long a sender holds a webhook: longer than its turn and the request it may end
    in, so no second sender joins it; a sender killed mid-turn lets go after this."""
    return send_budget() + CONNECT_TIMEOUT + settings.QP_WEBHOOK_TIMEOUT + 5.0


def signature(secret: str, body: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256 of the body keyed with the webhook's secret, as
    GitHub signs its webhooks: the receiver recomputes it and compares in constant time."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def backoff(tries: int) -> timedelta:
    """1 s, 2 s, 4 s … up to QP_WEBHOOK_MAX_BACKOFF between tries: a receiver back from an
    outage hears within that long."""
    return timedelta(seconds=min(2 ** max(tries - 1, 0), settings.QP_WEBHOOK_MAX_BACKOFF))


def webhooks_due(now=None) -> list[int]:
    """Webhooks whose oldest pending delivery is due and that no lease holds (a sender
    holding one's lock is found out by send_webhook)."""
    now = now or timezone.now()
    return list(
        Webhook.objects.filter(
            Q(leased_until__isnull=True) | Q(leased_until__lt=now),
            deliveries__status=DeliveryStatus.PENDING,
            deliveries__next_try_at__lte=now,
        )
        .values_list("id", flat=True)
        .distinct()
    )


def send_webhook(webhook_id: int) -> int:
    """Send the webhook's pending deliveries in order until one is refused (the rest wait for
    it: order per job holds) or this turn's budget is spent; how many were accepted.

    One sender at a time per webhook: on PostgreSQL by a session lock, which a sender killed
    mid-turn lets go of at once, so its redelivery comes when the retry schedule says; on
    SQLite (one process) by a lease on the row."""
    with session_lock("webhook_send", webhook_id) as mine:
        if not mine:
            return 0  # another sender has it
        if connection.vendor == "postgresql":
            return _send_in_order(Webhook.objects.get(pk=webhook_id))
        return _send_leased(webhook_id)


def _send_leased(webhook_id: int) -> int:
    now = timezone.now()
    lease = now + timedelta(seconds=lease_seconds())
    taken = (
        Webhook.objects.filter(pk=webhook_id)
        .filter(Q(leased_until__isnull=True) | Q(leased_until__lt=now))
        .update(leased_until=lease)
    )
    if not taken:
        return 0
    try:
        return _send_in_order(Webhook.objects.get(pk=webhook_id))
    finally:
        Webhook.objects.filter(pk=webhook_id, leased_until=lease).update(leased_until=None)


def _send_in_order(webhook: Webhook) -> int:
    accepted = 0
    started = time.monotonic()
    with requests.Session() as session:
        while time.monotonic() - started < send_budget():
            delivery = (
                webhook.deliveries.filter(status=DeliveryStatus.PENDING).order_by("id").first()
            )
            if delivery is None or delivery.next_try_at > timezone.now():
                break
            if not _post(session, webhook, delivery):
                break
            accepted += 1
    return accepted


def _post(session: requests.Session, webhook: Webhook, delivery: Delivery) -> bool:
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "quotaportal-webhooks",
        SIGNATURE_HEADER: signature(webhook.secret, body),
        "X-Quotaportal-Event": delivery.detail_type,
        "X-Quotaportal-Delivery": str(delivery.pk),
    }
    begin_try(delivery)  # counted before it is made: a sender killed mid-try counted it
    code, error = None, ""
    try:
        response = session.post(
            webhook.url,
            data=body,
            headers=headers,
            timeout=(CONNECT_TIMEOUT, settings.QP_WEBHOOK_TIMEOUT),
            allow_redirects=False,
        )
        code = response.status_code
        if not 200 <= code < 300:
            error = f"HTTP {code}: {response.text[:200]}"
    except requests.RequestException as err:
        error = f"{type(err).__name__}: {err}"
    record_try(delivery, code, error)
    return not error


def begin_try(delivery: Delivery) -> None:
    """A try starts: counted, and the next one scheduled after its backoff, before the
    request goes out. A sender killed while it waits for the answer leaves the delivery as a
    try that failed: sent again when the retry schedule says (at least once), and the
    deliveries list counts it."""
    now = timezone.now()
    delivery.tries += 1
    delivery.last_tried_at = now
    delivery.next_try_at = now + backoff(delivery.tries)
    delivery.error = "no answer yet (the sender stopped during the try)"
    delivery.save(update_fields=["tries", "last_tried_at", "next_try_at", "error"])


def record_try(delivery: Delivery, code: int | None, error: str, *, begun: bool = True) -> None:
    """How a try went: accepted, retried after a backoff, or given up once its retry window
    (QP_WEBHOOK_RETRY_HOURS since the event) has closed. `begun`: begin_try counted it."""
    now = timezone.now()
    if not begun:
        delivery.tries += 1
    delivery.last_tried_at = now
    delivery.response_status = code
    delivery.error = error[:500]
    if not error:
        delivery.status, delivery.delivered_at = DeliveryStatus.DELIVERED, now
    elif now - delivery.created_at >= timedelta(hours=settings.QP_WEBHOOK_RETRY_HOURS):
        delivery.status = DeliveryStatus.GAVE_UP
        log.warning("delivery %s given up after %s tries: %s", delivery.pk, delivery.tries, error)
    else:
        delivery.next_try_at = now + backoff(delivery.tries)
    delivery.save(
        update_fields=[
            "tries",
            "last_tried_at",
            "response_status",
            "error",
            "status",
            "delivered_at",
            "next_try_at",
        ]
    )


def send_emails(limit: int = 100) -> int:
    """Due e-mails, each sent once by whichever sender locked it; how many were sent."""
    sent = 0
    with transaction.atomic():
        due = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                webhook__isnull=True,
                status=DeliveryStatus.PENDING,
                next_try_at__lte=timezone.now(),
            )
            .select_related("recipient")
            .order_by("id")[:limit]
        )
        for delivery in due:
            subject, _, text = delivery.body.partition("\n\n")
            error = ""
            try:
                send_mail(subject, text, None, [delivery.recipient.email])
            except Exception as err:  # SMTP and socket errors vary by backend
                error = f"{type(err).__name__}: {err}"
            record_try(delivery, None, error, begun=False)
            sent += not error
    return sent
