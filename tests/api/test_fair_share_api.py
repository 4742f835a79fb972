"""Fair share over REST: a queue's policy switched on (seeded from the usage rows), off, and
refused when wrong; share weights; each share's standing; and the waiting borrower told who
borrows first and why."""

from __future__ import annotations

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.models import JobQueue, TickMemo
from quotaportal.tick.run import run_tick
from tests.builders import borrowed_yesterday, fair_borrowers, wants_to_borrow

WEEK = 7 * 86_400


@pytest.fixture
def borrowers(people):
    return fair_borrowers(people.admin)


def standings(client) -> dict:
    shares = client.get("/api/v1/quota-shares/?job_queue=gpu").json()["results"]
    return {share["name"]: share["fair_share_standing"] for share in shares}


def test_a_policy_switched_on_starts_from_the_usage_rows(as_user, borrowers):
    borrowed_yesterday("vision", 10.0)
    admin = as_user("ada")
    assert set(standings(admin).values()) == {None}  # no policy yet
    answer = admin.patch(
        "/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": WEEK}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["fair_share_half_life_seconds"] == WEEK
    assert answer.json()["fair_share_counts"] == "borrowed"
    found = standings(admin)
    # 10 instance-hours a day (and a half hour) ago, decayed by 2^(-1/7): about 9.05.
    assert found["vision"] == pytest.approx(10 * 2 ** (-(86_400 + 1800) / WEEK), abs=0.06)
    assert found["speech"] == 0.0
    assert standings(as_user("alice")) == found  # scientists read them too


def test_a_weight_divides_the_standing(as_user, borrowers):
    borrowed_yesterday("vision", 10.0)
    admin = as_user("ada")
    admin.patch("/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": WEEK}, format="json")
    before = standings(admin)["vision"]
    vision = next(
        s for s in admin.get("/api/v1/quota-shares/").json()["results"] if s["name"] == "vision"
    )
    answer = admin.patch(
        f"/api/v1/quota-shares/{vision['id']}/", {"fair_share_weight": 2}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["fair_share_weight"] == 2.0
    assert answer.json()["fair_share_standing"] == pytest.approx(before / 2, abs=0.01)


@pytest.mark.parametrize("weight", [0, -1, 1e9, "a lot", True])
def test_a_bad_weight_is_refused_by_name(as_user, borrowers, weight):
    admin = as_user("ada")
    vision = admin.get("/api/v1/quota-shares/").json()["results"][-1]
    answer = admin.patch(
        f"/api/v1/quota-shares/{vision['id']}/", {"fair_share_weight": weight}, format="json"
    )
    assert answer.status_code == 400
    assert "fair_share_weight" in str(answer.json())


@pytest.mark.parametrize("half_life", [0, -5, 10**12, "a week", 1.5, True])
def test_a_bad_half_life_is_refused_and_nothing_changes(as_user, borrowers, half_life):
    answer = as_user("ada").patch(
        "/api/v1/job-queues/gpu/",
        {"fair_share_half_life_seconds": half_life, "priority": 7},
        format="json",
    )
    assert answer.status_code == 400
    assert "fair_share_half_life_seconds" in answer.json()
    queue = JobQueue.objects.get(name="gpu")
    assert (queue.fair_share_half_life_seconds, queue.priority) == (None, 1)


def test_bad_counts_are_refused(as_user, borrowers):
    answer = as_user("ada").patch(
        "/api/v1/job-queues/gpu/",
        {"fair_share_half_life_seconds": WEEK, "fair_share_counts": "everything"},
        format="json",
    )
    assert answer.status_code == 400
    assert "fair_share_counts" in answer.json()


def test_only_admins_set_a_policy(as_user, borrowers):
    answer = as_user("alice").patch(
        "/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": WEEK}, format="json"
    )
    assert answer.status_code == 403
    assert JobQueue.objects.get(name="gpu").fair_share_half_life_seconds is None


def test_a_policy_switched_off_forgets_the_account(as_user, borrowers):
    borrowed_yesterday("vision", 10.0)
    admin = as_user("ada")
    admin.patch("/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": WEEK}, format="json")
    answer = admin.patch(
        "/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": None}, format="json"
    )
    assert answer.status_code == 200
    assert set(standings(admin).values()) == {None}
    assert TickMemo.objects.get(queue__name="gpu").fair_use == {}


def test_a_queue_created_with_a_policy_has_it(as_user, borrowers):
    answer = as_user("ada").post(
        "/api/v1/job-queues/",
        {
            "name": "fair",
            "scheduling_policy": "fifo",
            "service_environment": "sim",
            "fair_share_half_life_seconds": 3600,
            "fair_share_counts": "all",
        },
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    queue = JobQueue.objects.get(name="fair")
    assert (queue.fair_share_half_life_seconds, queue.fair_share_counts) == (3600, "all")


def test_a_queue_with_a_bad_policy_is_not_created(as_user, borrowers):
    answer = as_user("ada").post(
        "/api/v1/job-queues/",
        {
            "name": "fair",
            "scheduling_policy": "fifo",
            "service_environment": "sim",
            "fair_share_half_life_seconds": 0,
        },
        format="json",
    )
    assert answer.status_code == 400
    assert not JobQueue.objects.filter(name="fair").exists()


def test_without_a_policy_the_older_job_borrows_first(people, as_user, borrowers):
    borrowed_yesterday("vision", 10.0)
    vision, speech = wants_to_borrow(people, borrowers)
    assert vision.status != "RUNNABLE"
    assert speech.status == "RUNNABLE"
    shown = as_user("alice").get(f"/api/v1/jobs/{speech.id}/").json()
    assert shown["fair_share_reason"] is None


def test_with_a_policy_the_one_that_borrowed_less_goes_first_and_the_other_is_told(
    people, as_user, borrowers
):
    borrowed_yesterday("vision", 10.0)
    as_user("ada").patch(
        "/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": WEEK}, format="json"
    )
    vision, speech = wants_to_borrow(people, borrowers)
    assert vision.status == "RUNNABLE"
    assert speech.status != "RUNNABLE"
    shown = as_user("alice").get(f"/api/v1/jobs/{vision.id}/").json()
    assert shown["waiting_because"] == "nothing idle to borrow"
    assert shown["fair_share_reason"].startswith("vision has borrowed 9.")
    assert "more than speech with 0." in shown["fair_share_reason"]
    assert shown["fair_share_reason"].endswith("speech borrows first.")
    assert "halves every 7 days" in shown["fair_share_reason"]


def test_an_aws_batch_queue_refuses_a_policy_its_scheduler_would_ignore(as_user, people):
    services.create_capacity_unit(people.admin, name="p4d")
    env = services.create_service_environment(
        people.admin, name="aws", backend="AWS_BATCH", region="us-west-2",
        capacity_limits={"p4d": 2},
    )  # fmt: skip
    services.create_job_queue(
        people.admin, name="in-aws", service_environment=env,
        scheduling_policy=services.create_scheduling_policy(people.admin, name="fifo"),
    )  # fmt: skip
    answer = as_user("ada").patch(
        "/api/v1/job-queues/in-aws/", {"fair_share_half_life_seconds": WEEK}, format="json"
    )
    assert answer.status_code == 400
    assert "own scheduler orders its jobs" in str(answer.json())
    assert JobQueue.objects.get(name="in-aws").fair_share_half_life_seconds is None


def test_a_deleted_shares_past_leaves_the_account(people, as_user, borrowers):
    borrowed_yesterday("speech", 5.0)
    as_user("ada").patch(
        "/api/v1/job-queues/gpu/", {"fair_share_half_life_seconds": WEEK}, format="json"
    )
    assert "speech" in TickMemo.objects.get(queue__name="gpu").fair_use
    speech = borrowers.quota_shares.get(name="speech")
    services.update_share(people.admin, speech, state="DISABLED")
    services.delete_share(people.admin, speech)
    run_tick(borrowers.id)
    assert "speech" not in TickMemo.objects.get(queue__name="gpu").fair_use
