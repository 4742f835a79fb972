"""E-mail to a job's submitter, sent through a real SMTP server (aiosmtpd), only when they
asked for it."""

from __future__ import annotations

import email
import socket
from email import policy

import pytest
from aiosmtpd.controller import Controller

from quotaportal.notifications import services
from quotaportal.notifications.models import Delivery, DeliveryStatus
from quotaportal.notifications.tasks import deliver_round
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.services import finish_job, terminate_job
from quotaportal.tick.run import run_tick
from tests.builders import submit
from tests.notifications.builders import borrow_then_reclaim


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        message = email.message_from_bytes(envelope.content, policy=policy.default)
        self.messages.append((envelope.rcpt_tos, message))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def inbox(settings):
    handler = Inbox()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": port},
        }
    }
    yield handler
    controller.stop()


def opt_in(user, **choices):
    user.email = f"{user.username}@example.org"
    user.save(update_fields=["email"])
    flags = {"on_preempted": False, "on_failed": False, "on_succeeded": False, **choices}
    services.set_email_preference(user, **flags)


@pytest.mark.django_db
def test_a_submitter_who_opted_in_hears_of_a_preemption_by_email(people, fleet, inbox):
    opt_in(people.alice, on_preempted=True)
    _, borrower, _ = borrow_then_reclaim(people, fleet)
    deliver_round()
    ((to, message),) = inbox.messages
    assert to == ["alice@example.org"]
    assert message["Subject"] == (
        "[quotaportal] Job borrower (queue gpu, share vision) was preempted"
    )
    text = message.get_content()
    assert "Reason: PREEMPTION_IN_PROGRESS: Cross-share preemption" in text
    assert f"/jobs/{borrower.pk}/" in text
    sent = Delivery.objects.get(recipient=people.alice)
    assert sent.status == DeliveryStatus.DELIVERED


@pytest.mark.django_db
def test_failed_and_finished_jobs_reach_only_who_asked_for_them(people, fleet, inbox):
    opt_in(people.alice, on_failed=True)
    opt_in(people.bob, on_succeeded=True)
    done = submit(people.alice, fleet, name="done")
    failed = submit(people.alice, fleet, name="failed")
    bobs = submit(people.bob, fleet, share="nlp", name="bobs")
    run_tick(fleet.queue.id)
    finish_job(done, "SUCCEEDED")
    terminate_job(people.alice, failed, "no longer needed")
    finish_job(bobs, "SUCCEEDED")
    deliver_round()
    subjects = sorted((to[0], m["Subject"]) for to, m in inbox.messages)
    assert subjects == [
        ("alice@example.org", "[quotaportal] Job failed (queue gpu, share vision) is FAILED"),
        ("bob@example.org", "[quotaportal] Job bobs (queue gpu, share nlp) is SUCCEEDED"),
    ]


@pytest.mark.django_db
def test_nobody_is_mailed_without_opting_in(people, fleet, inbox):
    people.alice.email = "alice@example.org"
    people.alice.save()
    borrow_then_reclaim(people, fleet)
    deliver_round()
    assert inbox.messages == []
    assert not Delivery.objects.filter(recipient__isnull=False).exists()


@pytest.mark.django_db
def test_opting_in_needs_an_address(people):
    with pytest.raises(InvalidInput, match="no e-mail address"):
        services.set_email_preference(
            people.bob, on_preempted=True, on_failed=False, on_succeeded=False
        )


@pytest.mark.django_db
def test_an_smtp_server_that_is_down_is_retried(people, fleet, inbox, settings):
    opt_in(people.alice, on_failed=True)
    job = submit(people.alice, fleet)
    terminate_job(people.alice, job, "stop")
    settings.MAILERS["default"]["OPTIONS"]["port"] = 1  # nothing listens there
    deliver_round()
    pending = Delivery.objects.get(recipient=people.alice)
    assert pending.status == DeliveryStatus.PENDING
    assert pending.tries == 1
    assert "Connection" in pending.error or "refused" in pending.error
