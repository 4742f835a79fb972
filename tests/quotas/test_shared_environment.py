"""Queues that share a service environment never exceed its capacity together: they share it
in job-queue priority order, without preempting each other. Plus the tick's other duties:
impossible jobs step aside, RUNNABLE time limits, and ticks of deleted queues."""

from __future__ import annotations

import contextlib
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import Placement
from quotaportal.quotas import services
from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import DISPATCHED, Job, JobQueue, SchedulingPolicy
from quotaportal.tick.run import run_tick
from tests.quotas.builders import in_use, put, two_queues

pytestmark = pytest.mark.django_db


def test_two_queues_on_one_environment_never_exceed_its_capacity(people):
    env, queues = two_queues(people.admin, capacity=20)
    put(queues["lo"], 2, 10, "lo")
    put(queues["hi"], 2, 10, "hi")
    run_tick(queues["lo"].id)  # asked by the lower queue: the higher is served first
    assert in_use(env) == 20
    assert {j.job_queue.name for j in Job.objects.filter(status__in=DISPATCHED)} == {"hi"}
    lo = Job.objects.filter(job_queue=queues["lo"]).order_by("name").first()
    assert lo.status == "RUNNABLE"
    assert lo.pending_reason == "WAITING_FOR_CAPACITY"


def test_a_lower_queue_uses_what_the_higher_leaves_and_is_never_preempted_by_it(people):
    env, queues = two_queues(people.admin, capacity=4)
    lo = put(queues["lo"], 4, 1, "lo", simulated_duration_seconds=1000)
    run_tick(queues["hi"].id)
    assert in_use(env) == 4, "the higher queue had nothing: the lower took everything"
    put(queues["hi"], 1, 1, "hi")
    run_tick(queues["hi"].id)
    assert in_use(env) == 4
    assert all(Job.objects.get(pk=j.pk).status in DISPATCHED for j in lo), (
        "no cross-queue preemption"
    )
    assert Job.objects.get(name="hi0").status == "RUNNABLE"
    services.finish_job(Job.objects.get(pk=lo[0].pk), "SUCCEEDED")
    put(queues["lo"], 1, 1, "lo-late")
    run_tick(queues["lo"].id)
    assert Job.objects.get(name="hi0").status == "SCHEDULED", "freed capacity goes to hi first"
    assert Job.objects.get(name="lo-late0").status == "RUNNABLE"


def test_two_queues_on_local_hosts_never_place_more_than_the_slots(people):
    env, queues = two_queues(people.admin, capacity=8, backend="LOCAL")
    for name in ("gpu-1", "gpu-2"):
        token = host_services.token_for(host_services.create_agent_token(None, env, name))
        host_services.register_host(token, name=name, capacity_unit="a100", gpus=[0, 1, 2, 3])
    put(queues["hi"], 5, 1, "hi")
    put(queues["lo"], 8, 1, "lo")
    run_tick(queues["hi"].id)
    run_tick(queues["lo"].id)
    assert in_use(env) == 8
    for host in ("gpu-1", "gpu-2"):
        slots = [
            s
            for p in Placement.objects.filter(host__name=host, attempt__stopped_at__isnull=True)
            for s in p.slot_numbers
        ]
        assert sorted(slots) == [0, 1, 2, 3], f"{host}: every slot used once"


@pytest.mark.postgresql
@pytest.mark.django_db(transaction=True)
def test_parallel_ticks_of_both_queues_never_overbook(people):
    env, queues = two_queues(people.admin, capacity=6)
    put(queues["hi"], 6, 1, "hi", simulated_duration_seconds=0.2)
    put(queues["lo"], 6, 1, "lo", simulated_duration_seconds=0.2)
    stop, peaks, errors = threading.Event(), [], []

    def ticker(queue_id):
        try:
            while not stop.is_set():
                run_tick(queue_id)
                peaks.append(in_use(env))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(repr(err))
        finally:
            connection.close()

    threads = [threading.Thread(target=ticker, args=(q.id,)) for q in queues.values() for _ in "ab"]
    for thread in threads:
        thread.start()
    deadline = timezone.now() + timedelta(seconds=4)
    while timezone.now() < deadline and Job.objects.exclude(status="SUCCEEDED").exists():
        with contextlib.suppress(ServiceError):
            put(queues["lo"], 1, 1, "more", simulated_duration_seconds=0.2)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert not errors
    assert peaks
    assert max(peaks) <= 6


def test_a_job_made_impossible_by_a_lower_borrow_limit_no_longer_blocks_its_share(people, fleet):
    """vision: limit 2, LEND_AND_BORROW, unlimited borrowing, STRICT ordering."""
    from tests.builders import submit

    for i in range(2):
        submit(people.bob, fleet, share="nlp", name=f"n{i}")
    run_tick(fleet.queue.id)  # nlp holds its 2 of the 4 instances
    big = submit(people.alice, fleet, name="big", quantity=4, scheduling_priority=9)
    behind = submit(people.alice, fleet, name="behind", quantity=1)
    run_tick(fleet.queue.id)
    assert Job.objects.get(pk=behind.pk).pending_reason == "BEHIND_SHARE_HEAD"
    services.update_share(people.admin, fleet.vision, borrow_limit=50)  # ceiling now 3 < 4
    run_tick(fleet.queue.id)
    assert Job.objects.get(pk=behind.pk).status == "SCHEDULED", "the job behind moved on"
    stuck = Job.objects.get(pk=big.pk)
    assert (stuck.status, stuck.pending_reason) == ("RUNNABLE", "EXCEEDS_SHARE_CEILING")


def test_jobs_heading_their_share_too_long_are_terminated_by_the_queue_time_limit(people, fleet):
    from tests.builders import submit

    services.update_job_queue(
        people.admin,
        fleet.queue,
        job_state_time_limit_actions=[
            {
                "reason": "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY",
                "state": "RUNNABLE",
                "max_time_seconds": 600,
                "action": "TERMINATE",
            }
        ],
    )
    t0 = timezone.now()
    running = [submit(people.bob, fleet, share="nlp", name=f"n{i}", now=t0) for i in range(2)]
    run_tick(fleet.queue.id, now=t0)
    # 3 instances: its own 2 plus 1 borrowed, but nlp holds the other 2 within its limit.
    head = submit(people.alice, fleet, name="head", quantity=3, now=t0)
    second = submit(people.alice, fleet, name="second", now=t0 + timedelta(seconds=1))
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=599))
    assert Job.objects.get(pk=head.pk).status == "RUNNABLE"
    assert Job.objects.get(pk=second.pk).pending_reason == "BEHIND_SHARE_HEAD"
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=601))
    ended = Job.objects.get(pk=head.pk)
    assert ended.status == "FAILED"
    assert ended.status_reason == (
        "Terminated by JobStateTimeLimit action due to reason: "
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
    )
    assert Job.objects.get(pk=second.pk).status == "SCHEDULED", "the next job moved up"
    assert all(Job.objects.get(pk=j.pk).status != "FAILED" for j in running)


@pytest.mark.parametrize(
    "actions",
    [
        [{"reason": "x", "state": "RUNNABLE", "max_time_seconds": 599, "action": "TERMINATE"}],
        [{"reason": "x", "state": "RUNNING", "max_time_seconds": 600, "action": "TERMINATE"}],
        [{"reason": "", "state": "RUNNABLE", "max_time_seconds": 600, "action": "TERMINATE"}],
        [{"reason": "stuck", "state": "RUNNABLE", "max_time_seconds": 600, "action": "TERMINATE"}],
    ],
)
def test_time_limit_actions_follow_aws_rules(as_admin_api, fleet, actions):
    response = as_admin_api.patch(
        "/api/v1/job-queues/gpu/", {"job_state_time_limit_actions": actions}, format="json"
    )
    assert response.status_code == 400
    assert "job_state_time_limit_actions" in response.json()


def test_a_time_limit_acts_only_on_a_head_blocked_for_its_reason(people, fleet):
    """AWS: an action applies to a head blocked for its reason. nlp's head waits because its
    share is at its limit (it may not borrow): a capacity action leaves it alone, a quota
    action of the same length ends it."""
    from tests.builders import submit

    def limit(reason: str) -> list[dict]:
        return [
            {"reason": reason, "state": "RUNNABLE", "max_time_seconds": 600, "action": "TERMINATE"}
        ]

    t0 = timezone.now()
    for i in range(2):  # older, so they start first
        submit(people.bob, fleet, share="nlp", name=f"n{i}", now=t0 + timedelta(seconds=i))
    head = submit(people.bob, fleet, share="nlp", name="at-limit", now=t0 + timedelta(seconds=2))
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=2))
    assert Job.objects.get(pk=head.pk).pending_reason == "SHARE_AT_LIMIT"
    capacity = "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"
    services.update_job_queue(
        people.admin, fleet.queue, job_state_time_limit_actions=limit(capacity)
    )
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=700))
    assert Job.objects.get(pk=head.pk).status == "RUNNABLE", "not blocked for capacity"
    quota = "MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED"
    services.update_job_queue(
        people.admin, fleet.queue, job_state_time_limit_actions=limit(capacity) + limit(quota)
    )
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=800))
    ended = Job.objects.get(pk=head.pk)
    assert ended.status == "FAILED"
    assert ended.status_reason.endswith(quota)


@pytest.fixture
def as_admin_api(people):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(people.admin)
    return client


def test_a_tick_of_a_deleted_queue_is_ignored_quietly(people, caplog):
    from quotaportal.quotas.tasks import tick_queue

    queue = services.create_job_queue(
        people.admin,
        name="gone",
        scheduling_policy=services.create_scheduling_policy(people.admin, name="p"),
        service_environment=services.create_service_environment(
            people.admin,
            name="e",
            capacity_limits={services.create_capacity_unit(people.admin, name="u").name: 1},
        ),
    )
    queue_id = queue.id
    services.delete_resource(people.admin, JobQueue.objects.get(pk=queue_id), "job queue")
    tick_queue.run(queue_id)
    assert run_tick(queue_id) is None
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert SchedulingPolicy.objects.filter(name="p").exists()
