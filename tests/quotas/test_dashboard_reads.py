"""The dashboard reads its queue in one grouped pass over the active jobs: what it shows must
be what every other page and /metrics show (selectors.share_utilization,
selectors.overcommitted_units), for borrowing, lending, waiting and disabled shares alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from quotaportal.jobs import transitions
from quotaportal.quotas import selectors, services
from quotaportal.quotas.dashboard import dashboard_version, queue_dashboard, with_bars
from quotaportal.quotas.models import Job, JobStatus
from quotaportal.tick import bridge
from quotaportal.tick.run import run_tick
from tests.builders import add_share, submit

pytestmark = pytest.mark.django_db


def read(queue):
    capacity = bridge.capacity_of(queue)
    return queue_dashboard(queue, capacity, since=timezone.now() - timedelta(hours=1))


def test_the_dashboard_counts_what_the_other_pages_count(people, fleet):
    for i in range(3):  # vision borrows nlp's idle instance: 3 on a limit of 2
        submit(people.alice, fleet, name=f"v{i}")
    submit(people.alice, fleet, name="v-waits", quantity=2)
    submit(people.bob, fleet, share="nlp", name="n0")
    run_tick(fleet.queue.id)
    # One share's jobs in two dispatched states: both count towards its use.
    transitions.mark_started(Job.objects.get(name="v0"))
    submit(people.bob, fleet, share="nlp", name="n-waits", quantity=2)
    spare = add_share(people.admin, fleet.queue, "spare", "nlp", 2, "LEND")
    services.update_share(people.admin, spare, state="DISABLED")

    data = read(fleet.queue)

    rows = {row["share"].name: row for row in data["shares"]}
    assert [row["share"].name for row in data["shares"]] == ["nlp", "spare", "vision"]
    expected = selectors.share_utilization(fleet.queue)
    for name, row in rows.items():
        assert {u.pop("unit"): u for u in row["units"]} == expected[name], name
    assert {job.status for job in Job.objects.filter(name__in=["v0", "v1", "v2"])} == {
        JobStatus.SCHEDULED,
        JobStatus.RUNNING,
    }
    dispatched = Job.objects.exclude(status=JobStatus.RUNNABLE).filter(is_terminated=False)
    assert rows["vision"]["running"] == dispatched.filter(quota_share=fleet.vision).count() == 3
    assert (rows["vision"]["runnable"], rows["nlp"]["running"], rows["nlp"]["runnable"]) == (
        1,
        1,
        1,
    )
    assert rows["spare"]["share"].team_name == "nlp"
    assert (rows["spare"]["running"], rows["spare"]["runnable"]) == (0, 0)
    # The disabled share's limit does not overcommit the queue, as on the shares page.
    assert data["overcommitted"] == selectors.overcommitted_units(fleet.queue) == []


def test_only_the_cards_drawn_get_bars(people, fleet):
    submit(people.alice, fleet, name="v0")
    run_tick(fleet.queue.id)
    rows = read(fleet.queue)["shares"]
    drawn = with_bars([row for row in rows if row["share"].name == "vision"])
    bar = drawn[0]["units"][0]
    assert bar["own"] == 1
    assert [(part, n) for part, n, _ in bar["segments"]] == [
        ("own", 1),
        ("borrowed", 0),
        ("lent", 0),
        ("idle", 1),
        ("short", 0),
    ]
    others = [row for row in rows if row["share"].name != "vision"]
    assert all("segments" not in unit for row in others for unit in row["units"])


def test_the_version_moves_with_capacity_and_events_and_not_otherwise(people, fleet):
    now = timezone.now()
    capacity = bridge.capacity_of(fleet.queue)
    first = dashboard_version(fleet.queue, capacity, now)
    assert dashboard_version(fleet.queue, capacity, now) == first
    assert dashboard_version(fleet.queue, {"a100": 3}, now) != first
    submit(people.alice, fleet, name="v0")
    assert dashboard_version(fleet.queue, capacity, now) != first
