"""One agent token cannot starve the web server: a newer heartbeat of the same host ends the
older one's wait at once, each process lets only a few heartbeats wait at a time (answering
the rest at once, with when to ask again), and people's requests go on being served."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.db import connection

from quotaportal.hosts import services as host_services
from quotaportal.hosts.services import long_polls
from tests.builders import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)
LONG = 30.0


@pytest.fixture
def env(people, settings):
    settings.QP_HOST_TIMEOUT = 60  # a wait is capped at a third of this: 20 s
    env, queue = build_queue(people.admin, unit="gpu1", capacity=8, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 8, "LEND", unit="gpu1")
    return env


def host(people, env, name: str):
    raw = host_services.create_agent_token(people.admin, env, name)
    token = host_services.token_for(raw)
    host_services.register_host(token, name=name, capacity_unit="gpu1", gpus=[0])
    version = host_services.heartbeat(token, name, [])["version"]
    return raw, token, version


def long_poll(token, name, version, answers: list, wait: float = LONG) -> None:
    began = time.monotonic()
    try:
        answer = host_services.heartbeat(token, name, [], wait=wait, known=version)
        answers.append((time.monotonic() - began, answer))
    finally:
        connection.close()


def in_thread(*args, **kwargs) -> threading.Thread:
    thread = threading.Thread(target=long_poll, args=args, kwargs=kwargs)
    thread.start()
    return thread


def wait_until(condition, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_newer_heartbeat_of_a_host_ends_the_older_ones_wait(people, env):
    _, token, version = host(people, env, "gpu-1")
    older_answers: list = []
    older = in_thread(token, "gpu-1", version, older_answers)
    wait_until(lambda: long_polls.waiting_count() == 1, "the first heartbeat to wait")
    newer = in_thread(token, "gpu-1", version, [], wait=1.0)
    older.join(5)
    assert not older.is_alive(), "the older wait ended when the newer heartbeat came"
    assert older_answers[0][1]["version"] == version, "it answers what it has"
    newer.join(5)
    assert long_polls.waiting_count() == 0


def test_with_every_slot_taken_a_heartbeat_is_answered_at_once_with_when_to_ask_again(
    people, env, settings
):
    settings.QP_LONG_POLL_SLOTS = 2
    hosts = [host(people, env, f"gpu-{n}") for n in range(3)]
    waiting = [
        in_thread(token, f"gpu-{n}", version, [], wait=3.0)
        for n, (_, token, version) in enumerate(hosts[:2])
    ]
    wait_until(lambda: long_polls.waiting_count() == 2, "two heartbeats to wait")
    _, token, version = hosts[2]
    began = time.monotonic()
    answer = host_services.heartbeat(token, "gpu-2", [], wait=LONG, known=version)
    assert time.monotonic() - began < 2, "answered at once, not after its wait"
    assert answer["poll_after"] == long_polls.POLL_AFTER_SECONDS
    assert answer["version"] == version
    for thread in waiting:
        thread.join(10)
    assert long_polls.waiting_count() == 0


def test_a_flood_from_one_token_leaves_people_and_other_hosts_served(
    people, env, live_server, settings
):
    """160 long-polls with one token, over HTTP: they hold one waiting slot between them, so
    a scientist's request and another host's heartbeat are answered meanwhile."""
    flooder, _, version = host(people, env, "flood")
    other, _, other_version = host(people, env, "steady")
    url = f"{live_server.url}/api/v1/agent/heartbeat/"

    def beat(raw, name, known, wait=LONG):
        body = {"name": name, "running": [], "wait": wait, "known": known}
        began = time.monotonic()
        try:
            answer = requests.post(
                url, json=body, headers={"Authorization": f"Agent {raw}"}, timeout=60
            )
        except requests.ConnectionError:
            # The test server's listen backlog is Django's 10 connections (gunicorn's is
            # 2,048), and 40 at once can have one reset; as an agent does, ask again.
            answer = requests.post(
                url, json=body, headers={"Authorization": f"Agent {raw}"}, timeout=60
            )
        return time.monotonic() - began, answer.status_code

    with ThreadPoolExecutor(max_workers=40) as pool:
        flood = [pool.submit(beat, flooder, "flood", version) for _ in range(160)]
        wait_until(lambda: long_polls.waiting_count() >= 1, "the flood to wait")
        time.sleep(0.5)
        assert long_polls.waiting_count() <= 2, "one slot for the flood (and one for the next)"
        scientist = requests.get(
            f"{live_server.url}/api/v1/jobs/",
            headers={"Authorization": f"Token {people.tokens['alice']}"},
            timeout=10,
        )
        assert scientist.status_code == 200
        steady = beat(other, "steady", other_version, wait=0)
        assert steady[1] == 200
        # End the last waiting flood request: a heartbeat that does not wait supersedes it.
        done = [f.result(timeout=60) for f in flood[:-1]]
        beat(flooder, "flood", version, wait=0.01)
        done.append(flood[-1].result(timeout=60))
    assert all(status == 200 for _, status in done)
    superseded = [seconds for seconds, _ in done if seconds < 15]
    assert len(superseded) >= 159, "all but the newest ended their wait when a newer one came"
