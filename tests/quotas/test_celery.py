"""A real Celery worker with beat, on the machine's Redis, dispatches a job with no manual tick."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import redis
from django.db import connection

from quotaportal.quotas.models import Job, SchedulerRun
from tests.conftest import submit

BROKER_DB = 14  # a Redis database of its own, so stale messages from elsewhere never interfere


def broker_url() -> str:
    return os.environ["REDIS_URL"].rsplit("/", 1)[0] + f"/{BROKER_DB}"


@pytest.mark.django_db(transaction=True)
def test_worker_with_beat_dispatches_a_submitted_job(people, fleet, repo, tmp_path):
    redis.Redis.from_url(broker_url()).flushdb()
    database = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "REDIS_URL": broker_url(),
        "QP_TICK_SECONDS": "1",
        "QP_IMMEDIATE_TICKS": "0",
    }
    celery = os.path.join(os.path.dirname(sys.executable), "celery")
    worker = subprocess.Popen(
        [
            celery,
            "-A",
            "quotaportal",
            "worker",
            "--beat",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--schedule",
            str(tmp_path / "beat-schedule"),
        ],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        job = submit(people.alice, fleet)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and Job.objects.get(pk=job.pk).status == "RUNNABLE":
            assert worker.poll() is None, "the worker exited early"
            time.sleep(0.5)
        assert Job.objects.get(pk=job.pk).status in ("SCHEDULED", "RUNNING")
        assert SchedulerRun.objects.filter(job_queue=fleet.queue, dispatched=1).exists()
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            output, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            output, _ = worker.communicate()
    assert "tick_all_queues" in output
