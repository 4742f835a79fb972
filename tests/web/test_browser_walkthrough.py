"""AWS's walkthrough in the browser, as the docs show it: the demo's world, QS1 borrowing
QS2's idle instance, QS2 taking it back. The screenshots are the docs' pictures
(`make screenshots` writes them into docs/images)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from quotaportal.quotas import services
from quotaportal.quotas.models import Job, JobQueue
from quotaportal.tick.run import run_tick
from tests.web.builders import shot

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "walkthrough-password"


def submit(username: str, share: str, name: str, priority: int):
    from django.contrib.auth import get_user_model

    return services.submit_job(
        get_user_model().objects.get(username=username),
        job_queue="gpu-queue",
        quota_share=share,
        capacity_unit="ml.g5.xlarge",
        name=name,
        scheduling_priority=priority,
        simulated_duration_seconds=3600,
    )


def test_the_walkthrough_reads_on_the_dashboard_and_the_preempted_job(browser, live_server):
    call_command("seed_demo", password=PASSWORD, stdout=StringIO())
    queue = JobQueue.objects.get(name="gpu-queue")
    for name, priority in (("qs1-high", 3), ("qs1-med", 2), ("qs1-low", 1)):
        submit("alice", "QS1", name, priority)
    run_tick(queue.id)
    assert Job.objects.get(name="qs1-med").status in ("SCHEDULED", "RUNNING"), "QS1 borrows"
    submit("bob", "QS2", "qs2-job", 1)
    run_tick(queue.id)
    taken_back = Job.objects.get(name="qs1-med")
    assert taken_back.status == "RUNNABLE"
    assert taken_back.preempted_count == 1

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#preemptions")).to_contain_text("qs2-job")
    expect(page.locator("#preemptions")).to_contain_text("cross-share")
    shot(page, "walkthrough-dashboard")
    page.goto(f"{live_server.url}/jobs/{taken_back.pk}/")
    expect(page.locator("#timeline")).to_contain_text("qs2-job")
    shot(page, "walkthrough-preempted-job")
    context.close()
