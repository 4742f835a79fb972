"""Quota share administration through the services, with AWS's rules and the audit log."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from quotaportal.quotas import services
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import Event, Job, QuotaShare, Team
from quotaportal.tick.run import run_tick
from tests.builders import submit


def create(actor, fleet, name="new", **fields):
    fields.setdefault("capacity_limits", {"a100": 1})
    fields.setdefault("sharing_strategy", "LEND")
    return services.create_share(
        actor, job_queue=fleet.queue, name=name, team=Team.objects.get(name="vision"), **fields
    )


def test_admin_creates_a_share_and_the_audit_log_names_them(people, fleet):
    share = create(people.admin, fleet, borrow_limit=None)
    assert share.borrow_limit == -1
    event = Event.objects.filter(share=share).get()
    assert (event.kind, event.actor_name) == ("share_created", "ada")


def test_a_scientist_cannot_create_change_or_delete_shares(people, fleet):
    with pytest.raises(Forbidden, match="only admins"):
        create(people.alice, fleet)
    with pytest.raises(Forbidden):
        services.update_share(people.alice, fleet.vision, state="DISABLED")
    with pytest.raises(Forbidden):
        services.delete_share(people.alice, fleet.vision)


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"capacity_limits": {}}, "capacity_limits", "between 1 and 5"),
        ({"capacity_limits": {"a100": 0}}, "capacity_limits", "from 1 to 1,000,000"),
        ({"capacity_limits": {"tpu": 1}}, "capacity_limits", "unknown capacity unit(s): tpu"),
        (
            {"sharing_strategy": "LEND", "borrow_limit": 50},
            "borrow_limit",
            "only to the LEND_AND_BORROW",
        ),
        (
            {"sharing_strategy": "LEND_AND_BORROW", "borrow_limit": -3},
            "borrow_limit",
            "from -1 to 1,000,000",
        ),
        ({"sharing_strategy": "SHARE"}, "sharing_strategy", "must be one of"),
        ({"state": "PAUSED"}, "state", "ENABLED or DISABLED"),
    ],
)
def test_bad_share_settings_are_rejected_with_the_field_and_rule(
    people, fleet, fields, field, message
):
    with pytest.raises(InvalidInput) as err:
        create(people.admin, fleet, **fields)
    assert message in err.value.errors[field]
    assert not QuotaShare.objects.filter(name="new").exists()


def test_share_names_are_unique_in_a_queue(people, fleet):
    with pytest.raises(InvalidInput, match="already exists in job queue gpu"):
        create(people.admin, fleet, name="vision")


def test_a_queue_holds_at_most_twenty_shares(people, fleet):
    for i in range(18):
        create(people.admin, fleet, name=f"s{i}")
    with pytest.raises(Conflict, match="already has 20 quota shares"):
        create(people.admin, fleet, name="one-too-many")


def test_leaving_lend_and_borrow_drops_the_borrow_limit(people, fleet):
    services.update_share(people.admin, fleet.vision, borrow_limit=200)
    share = services.update_share(people.admin, fleet.vision, sharing_strategy="RESERVE")
    assert (share.sharing_strategy, share.borrow_limit) == ("RESERVE", -1)
    change = Event.objects.filter(kind="share_changed").first()
    assert change.detail["changes"]["sharing_strategy"] == ["LEND_AND_BORROW", "RESERVE"]


def test_the_database_refuses_a_borrow_limit_on_a_lend_share(fleet):
    with pytest.raises(IntegrityError), transaction.atomic():
        QuotaShare.objects.filter(pk=fleet.nlp.pk).update(borrow_limit=50)


def test_a_share_must_be_disabled_before_it_is_deleted(people, fleet):
    job = submit(people.alice, fleet)
    with pytest.raises(Conflict, match="must be DISABLED"):
        services.delete_share(people.admin, fleet.vision)
    services.update_share(people.admin, fleet.vision, state="DISABLED")
    services.delete_share(people.admin, fleet.vision)
    job.refresh_from_db()
    assert (job.status, job.status_reason, job.quota_share) == (
        "FAILED",
        "Quota share deleted",
        None,
    )
    assert job.share_name == "vision"


def test_a_disabled_share_rejects_new_jobs_but_runs_the_ones_it_has(people, fleet):
    waiting = submit(people.alice, fleet)
    services.update_share(people.admin, fleet.vision, state="DISABLED")
    with pytest.raises(InvalidInput, match="DISABLED and accepts no new jobs"):
        submit(people.alice, fleet)
    run_tick(fleet.queue.id)
    assert Job.objects.get(pk=waiting.pk).status == "SCHEDULED"


def test_lowering_a_limit_preempts_nothing_by_itself(people, fleet):
    jobs = [submit(people.alice, fleet, name=f"v{i}") for i in range(2)]
    run_tick(fleet.queue.id)
    services.update_share(people.admin, fleet.vision, capacity_limits={"a100": 1})
    run = run_tick(fleet.queue.id)
    assert run.preempted == 0
    assert all(Job.objects.get(pk=j.pk).status == "RUNNING" for j in jobs)
