"""Every kind of event reads as words: the audit log's filter, its rows and a job's timeline
never show a code such as `preemption_completed` or `cross_share`."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from quotaportal.quotas.models import Event, EventKind
from quotaportal.web.events import LABELS, describe

pytestmark = pytest.mark.django_db

CODE = re.compile(r"\b[a-z]+_[a-z_]+\b")  # snake_case, as the kinds and their details are


def test_every_kind_has_a_label_in_words():
    for kind in EventKind.values:
        assert kind in LABELS, kind
        assert not CODE.search(LABELS[kind]), LABELS[kind]


def test_the_audit_filter_offers_words(people):
    client = Client()
    client.force_login(people.admin)
    html = client.get("/audit/").content.decode()
    options = re.findall(r'<option value="[a-z_]*"[^>]*>([^<]*)</option>', html)
    assert "Preemption completed" in options
    assert [o for o in options if CODE.search(o)] == []


def test_a_completed_preemption_reads_as_a_sentence(people):
    for requeued, says in ((True, "back in line"), (False, "its attempt stopped")):
        event = Event(
            kind=EventKind.PREEMPTION_COMPLETED,
            actor_name="system",
            detail={"preempted_count": 2, "requeued": requeued},
        )
        (shown,) = describe([event])
        assert shown.label == "Preemption completed"
        assert says in shown.sentence
        assert "preempted 2 times so far" in shown.sentence
        assert not CODE.search(str(shown.sentence))
