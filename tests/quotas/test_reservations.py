"""Reserved capacity through the control plane: the service, the tick that fits, the audit log,
and the ticks asked for at a reservation's instants."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from quotaportal.quotas import tasks
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import DISPATCHED, Event, EventKind, Job, Reservation
from quotaportal.quotas.services import reservations
from quotaportal.tick import bridge, changes
from quotaportal.tick import run as tick
from quotaportal.tick.loop import SchedulerLoop
from quotaportal.tick.run import run_tick
from tests.quotas.builders import in_use, put, two_queues

pytestmark = pytest.mark.django_db

REASON = "PREEMPTION_IN_PROGRESS: Capacity reservation ended"
BACK_IN_LINE = "Preempted: a capacity reservation ended; waiting to run again"


def reserve(admin, env, start, end, instances=2, name="plan-1", now=None):
    return reservations.create_reservation(
        admin,
        env,
        name=name,
        capacity_unit="a100",
        instances=instances,
        starts_at=start,
        ends_at=end,
        now=now,
    )


def test_capacity_follows_the_window_and_jobs_may_wait_for_it(people):
    env, queues = two_queues(people.admin, capacity=2)
    now = timezone.now()
    reserve(people.admin, env, now + timedelta(minutes=1), now + timedelta(minutes=2))
    assert bridge.capacity_now(env, now) == {"a100": 2}
    assert bridge.capacity_now(env, now + timedelta(seconds=90)) == {"a100": 4}
    assert bridge.capacity_now(env, now + timedelta(minutes=2)) == {"a100": 2}
    # A job of 3 fits only while the reservation is active: it is accepted and waits for it.
    (job,) = put(queues["hi"], 1, 3, "big")
    run_tick(queues["hi"].id, now=now)
    assert Job.objects.get(pk=job.pk).status == "RUNNABLE"
    run_tick(queues["hi"].id, now=now + timedelta(seconds=61))
    assert Job.objects.get(pk=job.pk).status == "SCHEDULED"
    # One larger than anything the environment will ever have is refused at once.
    with pytest.raises(InvalidInput):
        put(queues["hi"], 1, 5, "huge")


def test_when_it_ends_the_tick_preempts_to_fit_once_and_says_why(people):
    env, queues = two_queues(people.admin, capacity=2)
    start = timezone.now()
    end = start + timedelta(minutes=5)
    reserve(people.admin, env, start, end)
    jobs = put(queues["hi"], 4, 1, "hi", simulated_duration_seconds=3600)
    run_tick(queues["hi"].id, now=start + timedelta(seconds=1))
    assert in_use(env) == 4
    run_tick(queues["hi"].id, now=end)
    assert in_use(env) == 2
    preempted = Job.objects.filter(pk__in=[j.pk for j in jobs], status="RUNNABLE")
    assert preempted.count() == 2
    # Their attempts stopped with the preemption (SIMULATED): back in line, and they say so.
    assert {j.status_reason for j in preempted} == {BACK_IN_LINE}
    assert {a.status_reason for j in preempted for a in j.attempts.all()} == {REASON}
    assert all(j.preempted_count == 1 for j in preempted)
    events = Event.objects.filter(kind=EventKind.PREEMPTED_CAPACITY)
    assert sorted(str(e.job_id) for e in events) == sorted(str(j.pk) for j in preempted)
    assert Reservation.objects.get().fitted_at == end
    # Fitted once: the next ticks leave what runs alone and start nothing new.
    run_tick(queues["hi"].id, now=end + timedelta(seconds=1))
    assert in_use(env) == 2
    assert Event.objects.filter(kind=EventKind.PREEMPTED_CAPACITY).count() == 2


def test_an_inline_tick_leaves_an_ended_reservation_to_the_workers_tick(people):
    """A tick run inside an agent's batch plans that batch's changes only: the fit at a
    reservation's end, time-driven, waits for the workers' tick, which follows within a beat."""
    env, queues = two_queues(people.admin, capacity=2)
    start = timezone.now()
    end = start + timedelta(minutes=5)
    reserve(people.admin, env, start, end)
    put(queues["hi"], 4, 1, "hi", simulated_duration_seconds=3600)
    run_tick(queues["hi"].id, now=start + timedelta(seconds=1))
    with transaction.atomic(), changes.holding(env.id) as held:
        held.queue_ids.add(queues["hi"].id)  # as an agent's batch of exits would
        assert tick.tick_held(held, now=end)
    assert in_use(env) == 4, "nothing preempted, nothing started"
    assert Reservation.objects.get().fitted_at is None
    run_tick(queues["hi"].id, now=end)
    assert in_use(env) == 2
    assert Reservation.objects.get().fitted_at == end


def test_a_lower_queue_gives_before_a_higher_one(people):
    env, queues = two_queues(people.admin, capacity=2)
    start = timezone.now()
    end = start + timedelta(minutes=5)
    reserve(people.admin, env, start, end)
    put(queues["hi"], 2, 1, "hi", simulated_duration_seconds=3600)
    put(queues["lo"], 2, 1, "lo", simulated_duration_seconds=3600)
    run_tick(queues["hi"].id, now=start + timedelta(seconds=1))
    assert in_use(env) == 4
    run_tick(queues["lo"].id, now=end)
    assert in_use(env) == 2
    running = Job.objects.filter(status__in=DISPATCHED).values_list("name", flat=True)
    assert sorted(running) == ["hi0", "hi1"]


def test_a_cancelled_reservation_ends_now_or_goes_if_it_had_not_started(people):
    env, _ = two_queues(people.admin, capacity=2)
    now = timezone.now()
    active = reserve(people.admin, env, now - timedelta(minutes=1), now + timedelta(hours=1))
    later = reserve(
        people.admin, env, now + timedelta(hours=1), now + timedelta(hours=2), name="plan-2"
    )
    assert reservations.cancel_reservation(people.admin, active, now=now) == "ended early"
    assert Reservation.objects.get(pk=active.pk).ends_at == now
    assert reservations.cancel_reservation(people.admin, later, now=now) == "deleted"
    assert not Reservation.objects.filter(pk=later.pk).exists()
    with pytest.raises(InvalidInput, match="already over"):
        reservations.cancel_reservation(people.admin, Reservation.objects.get(), now=now)
    actions = Event.objects.filter(kind=EventKind.RESOURCE_CHANGED, detail__resource="reservation")
    assert sorted(e.detail["action"] for e in actions) == [
        "created",
        "created",
        "deleted",
        "ended early",
    ]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"name": ""}, "name", "1 to 128"),
        ({"name": "x" * 129}, "name", "1 to 128"),
        ({"capacity_unit": "h100"}, "capacity_unit", "choose"),
        ({"instances": 0}, "instances", "from 1"),
        ({"instances": True}, "instances", "whole number"),
        ({"instances": 2**40}, "instances", "1,000,000"),
        ({"ends_at": "start"}, "ends_at", "after the start"),
        ({"ends_at": "past"}, "ends_at", "already over"),
        ({"starts_at": "naive"}, "starts_at", "time zone"),
    ],
)
def test_bad_reservations_are_refused_with_what_to_fix(people, fields, field, message):
    env, _ = two_queues(people.admin, capacity=2)
    now = timezone.now()
    given = {
        "name": "plan",
        "capacity_unit": "a100",
        "instances": 1,
        "starts_at": now - timedelta(hours=2),
        "ends_at": now + timedelta(hours=1),
        **fields,
    }
    if given["ends_at"] == "start":
        given["ends_at"] = given["starts_at"]
    if given["ends_at"] == "past":
        given["ends_at"] = now - timedelta(hours=1)
    if given["starts_at"] == "naive":
        given["starts_at"] = now.replace(tzinfo=None)
    with pytest.raises(InvalidInput) as caught:
        reservations.create_reservation(people.admin, env, now=now, **given)
    assert message in caught.value.errors[field]
    assert not Reservation.objects.exists()


def test_only_admins_reserve_and_names_are_unique_per_environment(people):
    env, _ = two_queues(people.admin, capacity=2)
    now = timezone.now()
    with pytest.raises(Forbidden):
        reserve(people.alice, env, now, now + timedelta(hours=1))
    reserve(people.admin, env, now, now + timedelta(hours=1))
    with pytest.raises(InvalidInput, match="already has a reservation named plan-1"):
        reserve(people.admin, env, now, now + timedelta(hours=1))


def test_ticks_are_asked_for_at_the_window_and_the_loop_wakes_for_it(
    people, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = False  # as in production: Celery runs ticks at an eta
    asked = []
    monkeypatch.setattr(
        tasks.tick_queue_at, "apply_async", lambda args, eta: asked.append((args, eta))
    )
    env, queues = two_queues(people.admin, capacity=2)
    now = timezone.now()
    start, end = now + timedelta(seconds=1), now + timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        reserve(people.admin, env, start, end, now=now)
    queue_ids = {q.id for q in queues.values()}
    assert [eta for _, eta in asked] == [start, end]
    assert all(args[0] in queue_ids for args, _ in asked)
    # Without Celery the embedded loop sleeps no longer than until the window starts.
    assert reservations.next_capacity_change(now) == start
    assert SchedulerLoop(period=2.0).pause() <= 1.0


def test_a_job_waiting_for_reserved_capacity_is_expected_when_the_window_opens(people):
    from quotaportal.whatif import estimates

    env, queues = two_queues(people.admin, capacity=2)
    now = timezone.now().replace(microsecond=0)
    opens = now + timedelta(hours=2)
    reserve(people.admin, env, opens, opens + timedelta(hours=5), now=now)
    (job,) = put(queues["hi"], 1, 3, "big")
    run_tick(queues["hi"].id, now=now)
    estimates.refresh_estimates(queues["hi"], now)
    assert Job.objects.get(pk=job.pk).estimated_start_at == opens


def test_changes_at_one_instant_are_one_change_with_the_capacity_after_both(people):
    from quotaportal.quotas.selectors import upcoming_capacity_changes

    env, _ = two_queues(people.admin, capacity=2)
    now = timezone.now()
    handover = now + timedelta(hours=1)
    reserve(people.admin, env, now + timedelta(minutes=5), handover, instances=2, name="a")
    reserve(people.admin, env, handover, handover + timedelta(hours=1), instances=4, name="b")
    upcoming = upcoming_capacity_changes(env, now)
    assert [c["time"] for c in upcoming].count(handover) == 1
    (at_handover,) = [c for c in upcoming if c["time"] == handover]
    assert "a ends" in at_handover["what"]
    assert "b starts" in at_handover["what"]
    assert sum(at_handover["capacity"].values()) == 2 + 4
