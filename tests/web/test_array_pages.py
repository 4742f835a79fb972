"""The job array pages and a waiting job's dependencies on its page."""

from __future__ import annotations

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import submit

pytestmark = pytest.mark.django_db


def sweep(people, fleet, size=4, max_running=2):
    return services.submit_array(
        people.alice,
        size=size,
        max_running=max_running,
        job_queue=fleet.queue,
        quota_share="vision",
        capacity_unit="a100",
        name="sweep",
    )


def test_the_arrays_list_and_page_show_counts_by_status(people, fleet, client):
    array = sweep(people, fleet)
    client.force_login(people.bob)
    listed = client.get("/arrays/").content.decode()
    assert 'data-array="sweep"' in listed
    assert "2 RUNNABLE" in listed
    assert "2 PENDING" in listed
    page = client.get(f"/arrays/{array.pk}/").content.decode()
    assert f"/jobs/?array={array.pk}&amp;status=PENDING" in page
    assert "Terminate all" not in page  # bob is not on vision


def test_a_member_sets_priority_and_terminates_all_from_the_page(people, fleet, client):
    array = sweep(people, fleet)
    client.force_login(people.alice)
    assert "Terminate all" in client.get(f"/arrays/{array.pk}/").content.decode()
    bad = client.post(f"/arrays/{array.pk}/priority/", {"scheduling_priority": "10000"})
    assert bad.status_code == 400
    assert "less than or equal to 9999" in bad.content.decode()
    client.post(f"/arrays/{array.pk}/priority/", {"scheduling_priority": "7"})
    assert set(Job.objects.values_list("scheduling_priority", flat=True)) == {7}
    client.post(f"/arrays/{array.pk}/terminate/", {"reason": "wrong grid"})
    assert set(Job.objects.values_list("status", flat=True)) == {"FAILED"}


def test_another_team_cannot_change_an_array(people, fleet, client):
    array = sweep(people, fleet)
    client.force_login(people.bob)
    assert client.post(f"/arrays/{array.pk}/terminate/", {"reason": "x"}).status_code == 403
    assert (
        client.post(f"/arrays/{array.pk}/priority/", {"scheduling_priority": 1}).status_code == 403
    )
    assert not Job.objects.filter(status="FAILED").exists()


def test_a_childs_page_names_its_array_and_the_list_filters_by_it(people, fleet, client):
    array = sweep(people, fleet)
    other = submit(people.alice, fleet, name="single")
    client.force_login(people.alice)
    child = array.children.get(array_index=3)
    page = client.get(f"/jobs/{child.pk}/").content.decode()
    assert "child 3 of" in page
    assert "Waits for a place among its array" in page
    rows = client.get(f"/jobs/?array={array.pk}").content.decode()
    assert 'data-job="sweep[3]"' in rows
    assert f'data-job="{other.name}"' not in rows


def test_a_waiting_jobs_page_says_what_it_waits_for(people, fleet, client):
    first = submit(people.alice, fleet, name="train-3")
    then = submit(
        people.alice, fleet, name="eval", depends_on=[{"job_id": str(first.pk), "type": "afterok"}]
    )
    run_tick(fleet.queue.id)
    client.force_login(people.alice)
    page = client.get(f"/jobs/{then.pk}/").content.decode()
    assert "Waits for job train-3 to succeed" in page
    assert "afterok: starts once it succeeded" in page
    listed = client.get("/jobs/").content.decode()
    assert "Waits for job train-3 to succeed" in listed
