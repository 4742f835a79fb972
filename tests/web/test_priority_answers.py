"""A priority set on a job that has just ended: the 409 says why, in place, on the job page
and in the jobs list (its box gave way to the plain value, and the message was dropped)."""

from __future__ import annotations

import pytest
from django.test import Client

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import submit

pytestmark = pytest.mark.django_db


def test_a_priority_for_a_job_that_just_ended_says_why_in_place(people, fleet):
    job = submit(people.alice, fleet, name="short")
    run_tick(fleet.queue.id)
    services.finish_job(Job.objects.get(pk=job.pk), "SUCCEEDED")
    client = Client()
    client.force_login(people.alice)
    answer = client.post(
        f"/jobs/{job.pk}/priority/", {"scheduling_priority": "7"}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 409
    shown = answer.content.decode()
    assert 'role="alert"' in shown
    assert "is SUCCEEDED; its priority can no longer change" in shown
    assert Job.objects.get(pk=job.pk).scheduling_priority == 0
