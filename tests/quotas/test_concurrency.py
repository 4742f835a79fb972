"""Concurrent ticks (threads and separate processes), submits, priority changes and job ends
on PostgreSQL never over-book capacity, never run a job twice, and lose no job."""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection

from quotaportal.quotas import services
from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import DISPATCHED, Event, Job, JobAttempt
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue

# Parallel ticks and writers for half a minute: the integration lane, not `make test-fast`.
pytestmark = pytest.mark.slow

CAPACITY = 6
SECONDS = 4.0


def busy_fleet(people):
    _, queue = build_queue(people.admin, capacity=CAPACITY)
    for team in ("vision", "nlp"):
        add_share(people.admin, queue, team, team, 3, "LEND_AND_BORROW", in_share_preemption=True)
    return queue


def in_thread(fn, stop, errors):
    def loop():
        rng = random.Random(threading.get_ident())
        try:
            while not stop.is_set():
                with contextlib.suppress(ServiceError):  # a conflict is an expected answer
                    fn(rng)
        except Exception as err:  # noqa: BLE001 - reported by the test
            errors.append(repr(err))
        finally:
            connection.close()

    return threading.Thread(target=loop)


def _test_db_url() -> str:
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    return f"{base}/{connection.settings_dict['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_parallel_ticks_submits_and_changes_never_overbook_or_lose_a_job(people, repo):
    queue = busy_fleet(people)
    submitted: list = []
    peak = [0]
    stop, errors = threading.Event(), []
    users = {"vision": people.alice, "nlp": people.bob}

    def tick(rng):
        run_tick(queue.id)

    def submit(rng):
        share = rng.choice(["vision", "nlp"])
        job = services.submit_job(
            users[share],
            job_queue=queue,
            quota_share=share,
            capacity_unit="a100",
            name="j",
            quantity=rng.randint(1, 2),
            scheduling_priority=rng.randint(0, 5),
        )
        submitted.append(job.pk)
        time.sleep(0.01)

    def reprioritise(rng):
        if submitted:
            job = Job.objects.get(pk=rng.choice(submitted))
            services.set_priority(people.admin, job, rng.randint(0, 9))

    def finish(rng):
        job = Job.objects.filter(job_queue=queue, status__in=DISPATCHED).order_by("?").first()
        if job is not None:
            services.finish_job(job, rng.choice(["SUCCEEDED", "FAILED"]))
        time.sleep(0.02)

    def watch(rng):
        used = Job.objects.filter(job_queue=queue, status__in=DISPATCHED).values_list(
            "quantity", flat=True
        )
        peak[0] = max(peak[0], sum(used))

    workers = [
        in_thread(fn, stop, errors)
        for fn in (tick, tick, tick, submit, submit, reprioritise, finish, watch, watch)
    ]
    env = {**os.environ, "DATABASE_URL": _test_db_url(), "QP_IMMEDIATE_TICKS": "0"}
    loop = "for _ in $(seq 12); do python manage.py tick >/dev/null || exit 1; done"
    processes = [
        subprocess.Popen(
            ["bash", "-c", loop],
            cwd=repo,
            env={**env, "PATH": os.path.dirname(sys.executable) + ":" + env["PATH"]},
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    time.sleep(SECONDS)
    stop.set()
    for worker in workers:
        worker.join()
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr

    assert errors == []
    assert len(submitted) > 20, "the test should exercise a real load"
    assert peak[0] <= CAPACITY
    # No job lost: every accepted submission is a row in a valid state.
    statuses = dict(Job.objects.filter(pk__in=submitted).values_list("pk", "status"))
    assert set(statuses) == set(submitted)
    # No job running twice: at most one open attempt, exactly one while dispatched.
    for job_id, status in statuses.items():
        open_attempts = JobAttempt.objects.filter(job_id=job_id, stopped_at__isnull=True).count()
        assert open_attempts == (1 if status in DISPATCHED else 0), (job_id, status)
        dispatches = Event.objects.filter(job_id=job_id, kind="dispatched").count()
        assert dispatches == JobAttempt.objects.filter(job_id=job_id).count()
    final = sum(
        Job.objects.filter(job_queue=queue, status__in=DISPATCHED).values_list(
            "quantity", flat=True
        )
    )
    assert final <= CAPACITY
