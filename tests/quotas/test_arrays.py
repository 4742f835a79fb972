"""Job arrays and dependencies through the services and the real tick."""

from __future__ import annotations

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import DISPATCHED, Event, Job, JobArray
from quotaportal.quotas.selectors import array_counts
from quotaportal.tick.run import run_tick
from tests.builders import submit


def array(user, fleet, size, max_running=None, share="vision", **fields):
    fields.setdefault("capacity_unit", "a100")
    return services.submit_array(
        user,
        size=size,
        max_running=max_running,
        job_queue=fleet.queue,
        quota_share=share,
        name="sweep",
        **fields,
    )


def statuses(sweep) -> list[str]:
    return [
        "DISPATCHED" if status in DISPATCHED else status
        for status in sweep.children.order_by("array_index").values_list("status", flat=True)
    ]


def finish_dispatched(sweep, status="SUCCEEDED"):
    for job in sweep.children.filter(status__in=DISPATCHED):
        services.finish_job(job, status)


def test_an_array_makes_its_children_named_and_indexed(people, fleet):
    sweep = array(people.alice, fleet, 5, max_running=2)
    names = list(sweep.children.order_by("array_index").values_list("name", "array_index"))
    assert names == [(f"sweep[{i}]", i) for i in range(5)]
    assert statuses(sweep) == ["RUNNABLE"] * 2 + ["PENDING"] * 3
    assert Event.objects.filter(kind="submitted", job__array=sweep).count() == 5


def test_never_more_children_than_the_limit_run_and_the_next_go_in_index_order(people, fleet):
    sweep = array(people.alice, fleet, 7, max_running=2)
    seen_most = 0
    for _ in range(6):
        run_tick(fleet.queue.id)
        counts = array_counts([sweep.pk])[sweep.pk]
        running = sum(counts[s] for s in ("SCHEDULED", "STARTING", "RUNNING", "RUNNABLE"))
        seen_most = max(seen_most, running)
        finish_dispatched(sweep)
    run_tick(fleet.queue.id)
    finish_dispatched(sweep)
    assert seen_most == 2  # 4 GPUs free, yet only 2 at once
    assert statuses(sweep) == ["SUCCEEDED"] * 7
    released = Event.objects.filter(kind="released", job__array=sweep).order_by("id")
    assert [e.job.array_index for e in released] == [2, 3, 4, 5, 6]


def test_an_array_without_a_limit_is_planned_like_single_jobs(people, fleet):
    sweep = array(people.alice, fleet, 6)
    run_tick(fleet.queue.id)
    # vision borrows nlp's idle 2: all 4 GPUs busy, the rest wait RUNNABLE with a reason
    assert statuses(sweep).count("DISPATCHED") == 4
    assert statuses(sweep).count("RUNNABLE") == 2


@pytest.mark.parametrize(
    ("size", "max_running", "field"),
    [
        (0, None, "array_size"),
        (10_001, None, "array_size"),
        ("9", None, "array_size"),
        (True, None, "array_size"),
        (3, 0, "array_max_running"),
    ],
)
def test_bad_array_shapes_are_refused_and_nothing_is_made(people, fleet, size, max_running, field):
    with pytest.raises(InvalidInput) as err:
        array(people.alice, fleet, size, max_running)
    assert field in err.value.errors
    assert not JobArray.objects.exists()
    assert not Job.objects.exists()


def test_a_long_name_leaves_room_for_the_largest_index(people, fleet):
    with pytest.raises(InvalidInput, match="a name of at most 122"):
        services.submit_array(
            people.alice,
            size=10_000,
            job_queue=fleet.queue,
            quota_share="vision",
            capacity_unit="a100",
            name="n" * 123,
        )


def test_priority_and_terminate_act_on_every_open_child_and_only_for_the_team(people, fleet):
    sweep = array(people.alice, fleet, 4, max_running=1)
    run_tick(fleet.queue.id)
    finish_dispatched(sweep)
    with pytest.raises(Forbidden):
        services.set_array_priority(people.bob, sweep, 50)
    assert services.set_array_priority(people.alice, sweep, 50) == 3
    assert set(
        sweep.children.exclude(status="SUCCEEDED").values_list("scheduling_priority", flat=True)
    ) == {50}
    with pytest.raises(Forbidden):
        services.terminate_array(people.bob, sweep, "not mine")
    assert services.terminate_array(people.alice, sweep, "wrong learning rate") == 3
    assert statuses(sweep) == ["SUCCEEDED"] + ["FAILED"] * 3
    with pytest.raises(Conflict, match="every job of array sweep has ended"):
        services.set_array_priority(people.alice, sweep, 1)


def test_one_child_can_be_bumped_or_terminated_alone(people, fleet):
    sweep = array(people.alice, fleet, 3, max_running=1)
    last = sweep.children.get(array_index=2)
    services.set_priority(people.alice, last, 9)  # a PENDING child
    services.terminate_job(people.alice, sweep.children.get(array_index=1), "skip it")
    run_tick(fleet.queue.id)
    finish_dispatched(sweep)
    run_tick(fleet.queue.id)
    assert statuses(sweep) == ["SUCCEEDED", "FAILED", "DISPATCHED"]
    assert Job.objects.get(pk=last.pk).scheduling_priority == 9


def dependant(user, fleet, name, on, kind="afterok", **fields):
    return submit(
        user, fleet, name=name, depends_on=[{"job_id": str(on.pk), "type": kind}], **fields
    )


def test_a_waiting_job_says_what_it_waits_for_and_is_never_planned(people, fleet):
    first = submit(people.alice, fleet, name="train-3", quantity=2)
    then = dependant(people.alice, fleet, "eval", first, quantity=2)
    assert (then.status, then.status_reason) == ("PENDING", "Waits for its dependencies")
    run_tick(fleet.queue.id)
    then.refresh_from_db()
    assert then.status == "PENDING"  # 2 GPUs free, and still not planned
    assert then.status_reason == "Waits for job train-3 to succeed"
    services.finish_job(Job.objects.get(pk=first.pk), "SUCCEEDED")
    run_tick(fleet.queue.id)
    then.refresh_from_db()
    assert then.status in DISPATCHED


def test_a_failed_dependency_fails_the_whole_chain_with_its_reason(people, fleet):
    first = submit(people.alice, fleet, name="prep")
    second = dependant(people.alice, fleet, "train", first)
    third = dependant(people.alice, fleet, "report", second)
    anyway = dependant(people.alice, fleet, "cleanup", first, "afterany")
    run_tick(fleet.queue.id)
    services.finish_job(Job.objects.get(pk=first.pk), "FAILED")
    run_tick(fleet.queue.id)
    second.refresh_from_db()
    third.refresh_from_db()
    anyway.refresh_from_db()
    assert (second.status, second.status_reason) == (
        "FAILED",
        "Dependency not met: job prep failed (it was to succeed)",
    )
    assert (third.status, third.status_reason) == (
        "FAILED",
        "Dependency not met: job train failed (it was to succeed)",
    )
    assert anyway.status in DISPATCHED


@pytest.mark.parametrize(
    ("depends_on", "message"),
    [
        ("abc", "must be a list"),
        ([{"job_id": "not-an-id", "type": "afterok"}], "must be a list"),
        ([{"job_id": "3f1f0d2e-0000-4000-8000-000000000000", "type": "after"}], "type one of"),
        ([{"job_id": "3f1f0d2e-0000-4000-8000-000000000000"}] * 21, "at most 20"),
        ([{"job_id": "3f1f0d2e-0000-4000-8000-000000000000", "type": "afterok"}], "no job"),
    ],
)
def test_bad_dependencies_are_refused(people, fleet, depends_on, message):
    with pytest.raises(InvalidInput) as err:
        submit(people.alice, fleet, depends_on=depends_on)
    assert message in err.value.errors["depends_on"]
    assert not Job.objects.exists()


def test_a_job_can_depend_only_on_its_teams_jobs(people, fleet):
    """Another team's job's outcome is theirs: its id is answered as no job at all."""
    theirs = submit(people.bob, fleet, share="nlp", name="theirs")
    with pytest.raises(InvalidInput, match=f"no job {theirs.pk} of your teams"):
        dependant(people.alice, fleet, "mine", theirs)
    assert dependant(people.admin, fleet, "admins-may", theirs).status == "PENDING"
