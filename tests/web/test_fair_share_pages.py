"""Fair share in the pages: the queue's policy in its settings form, a share's weight in the
share form, the standings beside the shares, and the waiting borrower's page saying who
borrows first."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from quotaportal.quotas import services
from quotaportal.quotas.models import JobQueue, QuotaShare, WhatIf
from quotaportal.usage.fairness import set_policy
from quotaportal.whatif import runs as whatif
from tests.builders import borrowed_yesterday, fair_borrowers, wants_to_borrow

pytestmark = pytest.mark.django_db

WEEK = 7 * 86_400


@pytest.fixture
def borrowers(people):
    return fair_borrowers(people.admin)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def settings_form(queue, **changes) -> dict:
    return {
        "scheduling_policy": "fifo",
        "priority": queue.priority,
        "ordering": queue.ordering,
        "preemption_grace_seconds": queue.preemption_grace_seconds,
        "state": queue.state,
        "fair_share_counts": "borrowed",
        **changes,
    }


def test_the_queue_form_switches_the_policy_on_and_off(people, borrowers):
    borrowed_yesterday("vision", 10.0)
    admin = signed_in(people.admin)
    page = reverse("manage-queue", args=[borrowers.pk])
    answer = admin.post(page, settings_form(borrowers, fair_share_half_life_hours=168))
    assert answer.status_code == 302
    queue = JobQueue.objects.get(pk=borrowers.pk)
    assert queue.fair_share_half_life_seconds == WEEK
    shown = admin.get(page).content.decode()
    assert "halves every 7 days" in shown
    assert 'data-testid="standing">9.' in shown  # vision's 10 hours, a day decayed
    answer = admin.post(page, settings_form(queue, fair_share_half_life_hours=""))
    assert answer.status_code == 302
    assert JobQueue.objects.get(pk=borrowers.pk).fair_share_half_life_seconds is None
    assert "Fair-share standing" not in admin.get(page).content.decode()


@pytest.mark.parametrize("hours", [0, -1, 10**9, "a week"])
def test_a_bad_half_life_is_shown_beside_its_field(people, borrowers, hours):
    page = reverse("manage-queue", args=[borrowers.pk])
    answer = signed_in(people.admin).post(
        page, settings_form(borrowers, fair_share_half_life_hours=hours, priority=9)
    )
    assert answer.status_code == 400
    assert answer.context["form"].errors["fair_share_half_life_hours"]
    queue = JobQueue.objects.get(pk=borrowers.pk)
    assert (queue.fair_share_half_life_seconds, queue.priority) == (None, 1)


def share_form(**changes) -> dict:
    return {
        "job_queue": "gpu",
        "name": "vision",
        "team": "vision",
        "sharing_strategy": "LEND_AND_BORROW",
        "state": "ENABLED",
        "limit_unit_1": "a100",
        "limit_max_1": 1,
        **changes,
    }


def test_the_share_form_sets_a_weight_and_refuses_a_bad_one(people, borrowers):
    admin = signed_in(people.admin)
    vision = QuotaShare.objects.get(name="vision")
    page = f"/shares/{vision.pk}/edit/"
    assert admin.post(page, share_form(fair_share_weight=2.5)).status_code == 302
    assert QuotaShare.objects.get(pk=vision.pk).fair_share_weight == 2.5
    refused = admin.post(page, share_form(fair_share_weight=0))
    assert refused.status_code == 400
    assert "weight is a number above 0" in refused.content.decode()
    assert QuotaShare.objects.get(pk=vision.pk).fair_share_weight == 2.5
    assert admin.post(page, share_form(fair_share_weight="")).status_code == 302
    assert QuotaShare.objects.get(pk=vision.pk).fair_share_weight == 1.0


def test_the_shares_page_shows_each_standing_under_a_policy(people, borrowers):
    borrowed_yesterday("vision", 10.0)
    admin = signed_in(people.admin)
    assert "Fair-share standing" not in admin.get("/shares/").content.decode()
    set_policy(people.admin, borrowers, half_life_seconds=WEEK)
    shown = admin.get("/shares/").content.decode()
    assert "Fair-share standing" in shown
    assert 'data-testid="standing">9.' in shown
    assert 'data-testid="standing">0.0 instance-h' in shown


def test_the_waiting_borrowers_page_says_who_borrows_first(people, borrowers):
    borrowed_yesterday("vision", 10.0)
    set_policy(people.admin, borrowers, half_life_seconds=WEEK)
    vision, _ = wants_to_borrow(people, borrowers)
    shown = signed_in(people.alice).get(f"/jobs/{vision.pk}/").content.decode()
    assert 'data-testid="fair-share-reason">vision has borrowed 9.' in shown
    assert "speech borrows first." in shown


def test_a_what_if_replays_the_queues_history_with_fair_share_on_beside_off(
    people, borrowers, client, django_capture_on_commit_callbacks, settings
):
    """vision borrowed 2 GPUs for an hour; then its job and speech's wait for the owner's."""
    settings.QP_WHATIF_IN_PROCESS = True
    t0 = timezone.now() - timedelta(hours=3)
    for share, seconds_in, quantity, runs in (
        ("vision", 0, 3, 3600),
        ("owner", 3600, 2, 100),
        ("vision", 3610, 3, 600),
        ("speech", 3620, 3, 600),
    ):
        services.submit_job(
            people.alice if share != "owner" else people.bob, job_queue=borrowers,
            quota_share=share, name=f"{share}-{seconds_in}", capacity_unit="a100",
            quantity=quantity, simulated_duration_seconds=runs,
            now=t0 + timedelta(seconds=seconds_in),
        )  # fmt: skip
    client.force_login(people.admin)
    form = _draft_form(borrowers, fair_share_half_life_hours="24")
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(f"/what-if/queues/{borrowers.pk}/", form)
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    run = WhatIf.objects.get()
    today, draft = run.result["today"], run.result["draft"]
    assert today["shares"]["speech"]["wait_p90_s"] == 680.0  # vision's older job went first
    assert draft["shares"]["speech"]["wait_p90_s"] == 80.0  # speech had borrowed nothing
    assert draft["shares"]["vision"]["borrowed_hours"] == pytest.approx(
        today["shares"]["vision"]["borrowed_hours"]
    )
    page = client.get(answer["Location"]).content.decode()
    assert "Fair share: off → borrowed use halving every 1 day" in page
    assert 'data-testid="jain-draft"' in page
    assert client.post(f"/what-if/{run.pk}/apply/").status_code == 302
    assert JobQueue.objects.get(pk=borrowers.pk).fair_share_half_life_seconds == 86_400


def test_a_what_if_with_a_bad_weight_or_half_life_says_so(people, borrowers, client):
    client.force_login(people.admin)
    answer = client.post(
        f"/what-if/queues/{borrowers.pk}/",
        _draft_form(borrowers, fair_share_half_life_hours="0", s1_weight="-2"),
    )
    assert answer.status_code == 400
    assert answer.context["form"].errors["fair_share_half_life_hours"]
    answer = client.post(f"/what-if/queues/{borrowers.pk}/", _draft_form(borrowers, s1_weight="-2"))
    assert answer.status_code == 400
    assert "weight is a number above 0" in answer.content.decode()
    assert not WhatIf.objects.exists()


def _draft_form(queue, **overrides) -> dict:
    data = {"capacity": "a100=4", "source": "history", "since_hours": "24", "new_name": ""}
    for index, share in enumerate(whatif.draft_of(queue)["shares"]):
        data[f"s{index}_limits"] = ", ".join(f"{u}={n}" for u, n in share["limits"].items())
        data[f"s{index}_strategy"] = share["strategy"]
        data[f"s{index}_state"] = share["state"]
        data[f"s{index}_weight"] = share["weight"]
    data["fair_share_counts"] = "borrowed"
    data.update(overrides)
    return data


def test_a_queue_created_in_the_console_may_start_with_a_policy(people, borrowers):
    admin = signed_in(people.admin)
    fields = {
        "name": "fair-queue",
        "service_environment": "sim",
        "scheduling_policy": "fifo",
        "priority": 2,
        "ordering": "STRICT",
        "preemption_grace_seconds": 30,
        "state": "ENABLED",
    }
    assert admin.post(reverse("manage-queues"), fields).status_code == 302
    assert JobQueue.objects.get(name="fair-queue").fair_share_half_life_seconds is None
    fields |= {"name": "fairer", "fair_share_half_life_hours": 24, "fair_share_counts": "all"}
    assert admin.post(reverse("manage-queues"), fields).status_code == 302
    queue = JobQueue.objects.get(name="fairer")
    assert (queue.fair_share_half_life_seconds, queue.fair_share_counts) == (86_400, "all")
