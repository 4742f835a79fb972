"""A GPU's placements never overlap in the database, whichever request closes a rank first.

The soak found a heartbeat closing a preempted rank (its agent no longer ran it) while a
report of that rank's exit was being applied: the heartbeat's UPDATE, filtered through a
join, overwrote the exit the report had dated with its own later time, after the next job's
start on that GPU.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.hosts import services as host_services
from quotaportal.hosts.agent.agent import Agent
from quotaportal.hosts.models import Placement
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def preempted_rank(people, settings):
    """A rank that started on gpu-1 and whose attempt has ended (its job terminated) while
    the agent still stops it: the heartbeat that no longer lists it closes it. Its host's
    token, the rank's placement id, and the token's secret (what an agent sends)."""
    settings.QP_HOST_TIMEOUT = 60
    env, queue = build_queue(people.admin, unit="gpu1", capacity=1, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 1, "LEND", unit="gpu1")
    secret = host_services.create_agent_token(people.admin, env, "gpu-1")
    token = host_services.token_for(secret)
    host_services.register_host(token, name="gpu-1", capacity_unit="gpu1", gpus=[0])
    job = services.submit_job(
        people.admin, job_queue=queue, quota_share="a", capacity_unit="gpu1", name="victim"
    )
    run_tick(queue.pk)
    placement = Placement.objects.get(attempt__job=job)
    host_services.report_many(token, "gpu-1", [{"placement": placement.pk, "event": "started"}])
    services.terminate_job(people.admin, Job.objects.get(pk=job.pk), "not needed")
    return token, placement.pk, secret


def waiting_on_a_row_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def test_a_heartbeat_never_overwrites_the_exit_a_concurrent_report_dated(preempted_rank):
    token, placement, _ = preempted_rank
    reported_exit = timezone.now() - timedelta(seconds=1)
    holding, release = threading.Event(), threading.Event()

    def report_in_progress():
        """What a batch of reports does: lock the rank, date its exit, commit a bit later."""
        try:
            with transaction.atomic():
                Placement.objects.select_for_update().get(pk=placement)
                Placement.objects.filter(pk=placement).update(exited_at=reported_exit)
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    def heartbeat():
        try:
            host_services.heartbeat(token, "gpu-1", running=[])
        finally:
            connection.close()

    report = threading.Thread(target=report_in_progress)
    report.start()
    assert holding.wait(10)
    beat = threading.Thread(target=heartbeat)
    beat.start()
    deadline = time.monotonic() + 10
    while not waiting_on_a_row_lock() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert waiting_on_a_row_lock(), "the heartbeat's close waits for the report's lock"
    release.set()
    report.join(10)
    beat.join(10)
    assert Placement.objects.get(pk=placement).exited_at == reported_exit


def test_a_start_reported_after_its_rank_was_closed_is_dated_within_its_span(preempted_rank):
    """A start that arrives once the rank is closed (its host re-registered, say) ran no
    later than that close; its own close is no bound on it."""
    token, placement, _ = preempted_rank
    Placement.objects.filter(pk=placement).update(started_at=None)
    host_services.heartbeat(token, "gpu-1", running=[])  # the agent is done with it: closed
    closed = Placement.objects.get(pk=placement).exited_at
    host_services.report_many(token, "gpu-1", [{"placement": placement, "event": "started"}])
    assert Placement.objects.get(pk=placement).started_at == closed, "not after its close"

    Placement.objects.filter(pk=placement).update(started_at=None)
    age = (timezone.now() - closed).total_seconds() + 0.5  # seen before the close
    host_services.report_many(
        token, "gpu-1", [{"placement": placement, "event": "started", "age": age}]
    )
    rank = Placement.objects.select_related("attempt").get(pk=placement)
    assert rank.attempt.started_at <= rank.started_at < closed, "dated by its age alone"


def test_a_heartbeat_closes_only_the_ranks_its_agent_had_heard_of(preempted_rank):
    """A heartbeat sent before its agent heard of a rank (which a report's answer may bring
    it meanwhile) does not close that rank; one sent after it had heard of it does."""
    token, placement, _ = preempted_rank
    Placement.objects.filter(pk=placement).update(started_at=None)  # never started there
    host_services.heartbeat(token, "gpu-1", running=[], heard_up_to=placement - 1)
    assert Placement.objects.get(pk=placement).exited_at is None
    host_services.heartbeat(token, "gpu-1", running=[], heard_up_to=placement)
    assert Placement.objects.get(pk=placement).exited_at is not None


def test_the_agent_protocol_takes_heard_up_to_and_refuses_a_bad_one(preempted_rank):
    _, placement, secret = preempted_rank
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {secret}")

    def beat(**body):
        return client.post("/api/v1/agent/heartbeat/", {"name": "gpu-1", **body}, format="json")

    refused = beat(running=[], heard_up_to=-1)
    assert refused.status_code == 400
    assert "heard_up_to" in refused.json()
    assert beat(running=[], heard_up_to=placement - 1).status_code == 200
    assert Placement.objects.get(pk=placement).exited_at is None
    assert beat(running=[], heard_up_to=placement).status_code == 200
    assert Placement.objects.get(pk=placement).exited_at is not None


class SlowServer:
    """An agent client whose report requests wait until the test lets them through."""

    def __init__(self):
        self.through = threading.Event()

    def reports(self, name, batch):
        self.through.wait(10)
        return {"results": [{"ok": True} for _ in batch]}


def test_a_heartbeat_counts_a_rank_whose_exit_report_is_on_its_way(tmp_path):
    """Else the server would close the rank at the heartbeat's arrival, after its real exit,
    and the next job on its GPUs would look as if it started before that."""
    server = SlowServer()
    agent = Agent(
        client=server, name="gpu-1", capacity_unit="gpu1", gpus=[0], work_dir=tmp_path, address=""
    )
    agent.send(7, "exited", 0)
    assert agent.not_done() == [7], "its exit report has not been answered yet"
    server.through.set()
    assert agent.reporter.drain(timeout=10)
    assert agent.not_done() == []
    agent.reporter.close()


def test_a_heartbeat_counts_a_rank_placed_here_that_waits_for_its_gpus(tmp_path):
    """The soak saw a rank placed on a GPU its preempted predecessor still held, terminated
    before it started: the heartbeat that did not list it closed it, the predecessor exited,
    and the agent started it on the answer it had, after that close. Listed, it stays open
    until an answer has told the agent not to start it."""
    server = SlowServer()
    server.through.set()
    agent = Agent(
        client=server,
        name="gpu-1",
        capacity_unit="gpu1",
        gpus=[0, 1],
        work_dir=tmp_path,
        address="",
    )
    agent.running[7] = SimpleNamespace(gpus={0})  # preempted, still stopping
    agent.finished.add(5)
    agent.desired = [
        {"placement": 8, "gpu_indices": [0]},  # its successor, waiting for GPU 0
        {"placement": 9, "gpu_indices": [1], "hold": True},  # starts only on a later answer
        {"placement": 5, "gpu_indices": [1]},  # ran and exited; its report was answered
    ]
    assert agent.not_done() == [7, 8]

    agent.desired = []  # the answer that no longer places it here
    agent.running.clear()
    assert agent.not_done() == [], "now the agent is done with it: the heartbeat closes it"
    agent.reporter.close()
