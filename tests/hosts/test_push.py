"""Work is pushed to agents: a waiting heartbeat (long-poll) answers as soon as what should run
on its host changes, woken in-process or, across processes, over Redis."""

from __future__ import annotations

import time

import pytest
import redis
from django.db import connection

from quotaportal.hosts import services as host_services
from quotaportal.infra import wakeups
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue
from tests.hosts.builders import LONG, Fleet, Waiting, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def host(people, settings):
    settings.QP_HOST_TIMEOUT = 60  # the server caps a wait at a third of this: 20 s
    env, queue = build_queue(people.admin, unit="gpu1", capacity=2, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 2, "LEND", unit="gpu1")
    token = host_services.token_for(host_services.create_agent_token(people.admin, env, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="gpu1", gpus=[0, 1])
    first = host_services.heartbeat(token, "gpu-1", [])
    return token, queue, first["version"]


def submit(people, queue, name="job", **fields):
    return services.submit_job(
        people.admin, job_queue=queue, quota_share="a", capacity_unit="gpu1", name=name, **fields
    )


def test_a_waiting_heartbeat_answers_when_a_tick_places_work_on_its_host(people, host):
    token, queue, version = host
    waiting = Waiting(token, "gpu-1", version)
    assert waiting.result(within=0.3) is None, "nothing changed: it waits"
    job = submit(people, queue)
    run_tick(queue.pk)
    answer = waiting.result(within=10)
    assert answer is not None, "woken by the tick, well before its 20 s wait ran out"
    assert [p["job_id"] for p in answer["placements"]] == [str(job.pk)]
    assert answer["version"] != version


def test_a_terminated_job_wakes_its_host_to_stop_it(people, host):
    token, queue, _ = host
    job = submit(people, queue)
    run_tick(queue.pk)
    version = host_services.heartbeat(token, "gpu-1", [])["version"]
    waiting = Waiting(token, "gpu-1", version)
    services.terminate_job(people.admin, Job.objects.get(pk=job.pk), "not needed")
    answer = waiting.result(within=10)
    assert answer is not None
    assert answer["placements"] == []


def test_with_an_unchanged_version_the_heartbeat_waits_its_time_then_answers(host):
    token, _, version = host
    answer = host_services.heartbeat(token, "gpu-1", [], wait=0.3, known=version)
    assert (answer["placements"], answer["version"]) == ([], version)
    stale = host_services.heartbeat(token, "gpu-1", [], wait=LONG, known="something-else")
    assert stale["version"] == version, "a different version is answered at once"


def test_an_announcement_from_another_process_arrives_over_redis(people, host, settings):
    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    token, queue, version = host
    waiting = Waiting(token, "gpu-1", version)
    assert waiting.result(within=0.3) is None
    job = submit(people, queue)
    # The Celery worker's tick, in another process: commit, then only Redis says so.
    with wakeups_silenced():
        run_tick(queue.pk)
    env_id = queue.service_environment_id
    redis.Redis.from_url(settings.REDIS_URL).publish(wakeups.channel(), str(env_id))
    answer = waiting.result(within=10)
    assert answer is not None
    assert [p["job_id"] for p in answer["placements"]] == [str(job.pk)]


def test_a_process_hears_its_own_announcement_once_not_again_when_redis_relays_it(host):
    """Its waiters are woken at once; the copy Redis brings back later would move the mark
    of a waiter that started meanwhile (a heartbeat answered for nothing)."""
    _, queue, _ = host
    env_id, marker = queue.service_environment_id, -queue.service_environment_id
    mark, marker_mark = wakeups.generation(env_id), wakeups.generation(marker)
    wakeups.publish(env_id)
    # Another process's announcement, published after this one: Redis relays in order, so
    # once it has arrived, this process's own copy has come back too (and been dropped).
    client = redis.Redis.from_url(wakeups.settings.REDIS_URL)
    client.publish(wakeups.channel(), str(marker))
    assert wakeups.wait_for(marker, marker_mark, timeout=10)
    assert wakeups.generation(env_id) == mark + 1


class wakeups_silenced:  # noqa: N801 - reads as a statement
    """This process does not hear its own announcements, as another process would not."""

    def __enter__(self):
        self.original = wakeups.publish
        wakeups.publish = lambda env_id: None

    def __exit__(self, *exc):
        wakeups.publish = self.original


def test_an_agent_starts_new_work_at_once_not_at_its_next_heartbeat(
    people, live_server, tmp_path, settings
):
    settings.QP_HOST_TIMEOUT = 60  # long-polls of 15 s: an answer before that is a push
    fleet = Fleet(people, live_server, tmp_path)
    fleet.start_agent("host-1")
    try:
        time.sleep(1.5)  # its first heartbeat answered at once; the next one is waiting now
        job = fleet.submit(command="sleep 30")
        run_tick(fleet.queue.pk)
        wait_until(
            lambda: fleet.status(job) == "RUNNING", timeout=5, what="the job to start at once"
        )
    finally:
        fleet.stop()


def _placed(people, host, name="job"):
    token, queue, _ = host
    job = submit(people, queue, name)
    run_tick(queue.pk)
    placement = host_services.heartbeat(token, "gpu-1", [])["placements"][-1]["placement"]
    return job, placement


def test_the_exit_of_a_jobs_last_rank_wakes_no_heartbeat(people, host):
    """The agent that reports the last exit knows already; waking its heartbeat would cost
    a round trip per job for nothing."""
    token, queue, _ = host
    env_id = queue.service_environment_id
    job, placement = _placed(people, host)
    host_services.report(token, "gpu-1", placement=placement, event="started")
    mark = wakeups.generation(env_id)
    host_services.report(token, "gpu-1", placement=placement, event="exited", exit_code=0)
    assert Job.objects.get(pk=job.pk).status == "SUCCEEDED"
    assert wakeups.generation(env_id) == mark, "no one to wake"


def test_a_rank_that_fails_wakes_the_hosts_of_the_ranks_still_running(people, settings):
    settings.QP_HOST_TIMEOUT = 60
    env, queue = build_queue(people.admin, unit="gpu1", capacity=3, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 3, "LEND", unit="gpu1")
    tokens = {}
    for name, gpus in (("gpu-1", [0, 1]), ("gpu-2", [0])):
        tokens[name] = host_services.token_for(
            host_services.create_agent_token(people.admin, env, name)
        )
        host_services.register_host(tokens[name], name=name, capacity_unit="gpu1", gpus=gpus)
    job = submit(people, queue, "wide", quantity=3)
    run_tick(queue.pk)
    ranks = {
        name: host_services.heartbeat(token, name, [])["placements"][0]["placement"]
        for name, token in tokens.items()
    }
    mark = wakeups.generation(env.pk)
    host_services.report(
        tokens["gpu-2"], "gpu-2", placement=ranks["gpu-2"], event="exited", exit_code=3
    )
    assert Job.objects.get(pk=job.pk).status != "RUNNING"
    assert wakeups.generation(env.pk) > mark, "gpu-1's rank must stop"
    answer = host_services.heartbeat(tokens["gpu-1"], "gpu-1", [ranks["gpu-1"]])
    assert answer["placements"] == [], "gpu-1 is told to stop its rank"


def test_a_batch_of_reports_is_applied_in_order_a_stale_one_refused_alone(people, host):
    token, _, _ = host
    job, placement = _placed(people, host)
    errors = host_services.report_many(
        token,
        "gpu-1",
        [
            {"placement": placement, "event": "started"},
            {"placement": 999_999, "event": "started"},
            {"placement": placement, "event": "exited", "exit_code": 0},
        ],
    ).errors
    assert errors[0] is None
    assert errors[2] is None
    assert "placement 999999 is not on host gpu-1" in errors[1]
    assert Job.objects.get(pk=job.pk).status == "SUCCEEDED"


def test_a_batch_waits_for_a_tick_then_if_it_keeps_the_lock_each_report_commits_alone(
    people, host, monkeypatch
):
    """A batch ends jobs under the environment's tick lock, so it never holds rows a tick
    waits for; a tick that keeps the lock too long does not hold the reports back."""
    from quotaportal.hosts.services import reports
    from quotaportal.infra.locks import ADVISORY_LOCKS

    token, queue, _ = host
    job, placement = _placed(people, host)
    monkeypatch.setattr(reports, "BATCH_LOCK_SECONDS", 0.2)
    holder = connection.copy()
    key = [ADVISORY_LOCKS["environment_tick"], queue.service_environment_id]
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", key)
        errors = host_services.report_many(
            token,
            "gpu-1",
            [
                {"placement": placement, "event": "started"},
                {"placement": placement, "event": "exited", "exit_code": 0},
            ],
        ).errors
    finally:
        holder.close()
    assert errors == [None, None]
    assert Job.objects.get(pk=job.pk).status == "SUCCEEDED"
