"""A worker keeps its database connection from one task to the next, as a web process keeps
its own from one request to the next: a tick must not pay for a new PostgreSQL backend (its
start, its cold caches, its prepared statements gone) every time. A connection that is too
old or broken is closed between tasks all the same."""

from __future__ import annotations

import time

import pytest
from celery import signals
from django.db import connection

from quotaportal.quotas.models import Job
from quotaportal.quotas.tasks import tick_queue_now
from tests.builders import submit
from tests.workers import QUIET, TICK, deployment, wait_for, worker_with_beat


def _task_ends() -> None:
    signals.task_postrun.send(sender=tick_queue_now, task_id="t", task=tick_queue_now)


@pytest.mark.django_db(transaction=True)
def test_a_sound_connection_outlives_the_task_and_an_obsolete_one_is_closed():
    connection.ensure_connection()
    opened = connection.connection
    _task_ends()
    assert connection.connection is opened, "a sound connection serves the next task"

    connection.close_at = time.monotonic() - 1  # past CONN_MAX_AGE
    _task_ends()
    assert connection.connection is None, "an obsolete connection is closed after the task"


@pytest.mark.django_db(transaction=True)
def test_a_task_run_inline_leaves_its_callers_connection_alone():
    connection.ensure_connection()
    opened = connection.connection
    connection.close_at = time.monotonic() - 1
    tick_queue_now.push_request(is_eager=True)
    try:
        _task_ends()
    finally:
        tick_queue_now.pop_request()
    assert connection.connection is opened, "the caller's connection (and transaction) stays"


# libpq names the worker's connections, so the test counts the worker's backends alone: another
# process may still hold (or be closing) a connection to this test database at that moment.
WORKER_NAME = "qp-test-worker"


def _worker_backends() -> set[int]:
    """PostgreSQL backends the worker holds on this test's database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s",
            [WORKER_NAME],
        )
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_workers_ticks_share_one_database_connection(people, fleet, repo, tmp_path, broker):
    if connection.vendor != "postgresql":
        pytest.skip("backends are PostgreSQL's")
    app = deployment(broker)
    first = submit(people.alice, fleet)
    named = {**QUIET, "PGAPPNAME": WORKER_NAME}
    with worker_with_beat(repo, tmp_path, broker, "-X", "background", **named) as (worker, _):
        app.send_task(TICK, args=[fleet.queue.pk])
        wait_for(worker, lambda: Job.objects.get(pk=first.pk).status != "RUNNABLE", 30)
        # A connection the worker closed at its start may linger in the view for a moment.
        wait_for(worker, lambda: len(_worker_backends()) == 1, 5)
        after_first = _worker_backends()
        assert len(after_first) == 1, "the worker's connection stays open after its task"

        second = submit(people.alice, fleet)
        app.send_task(TICK, args=[fleet.queue.pk])
        wait_for(worker, lambda: Job.objects.get(pk=second.pk).status != "RUNNABLE", 30)
        assert Job.objects.get(pk=second.pk).status != "RUNNABLE", "the second tick ran"
        assert _worker_backends() == after_first, "the next task used the same connection"
