"""The Celery worker outlives broker outages: Redis (a server of this test's own) is stopped
and started again three times under a running worker while people keep submitting, and the
worker is still alive afterwards, reports itself to /healthz again and runs ticks again."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import redis
from django.db import connection
from django.utils import timezone

from quotaportal.infra.worker_health import key
from quotaportal.quotas.models import Job, SchedulerRun
from tests.builders import REPO, submit

sys.path.insert(0, str(REPO / "scripts"))  # the soak's servers: scripts/ is not a package
from servers import OwnRedis  # noqa: E402

# Worker processes and brokers: the integration lane, not `make test-fast`.
pytestmark = pytest.mark.slow

OUTAGES = 3
OUTAGE_SECONDS = 6


def until(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if result := condition():
                return result
        except (redis.ConnectionError, redis.TimeoutError):
            pass
        assert time.monotonic() < deadline, f"waited too long for {what}"
        time.sleep(0.2)


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
@pytest.mark.django_db(transaction=True)
def test_the_worker_survives_repeated_broker_outages(people, fleet, repo, tmp_path):
    broker = OwnRedis(tmp_path)  # started
    url = broker.url
    reported = lambda: redis.Redis(port=broker.port, socket_timeout=1).exists(key())  # noqa: E731
    database = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {**os.environ, "DATABASE_URL": database, "REDIS_URL": url, "QP_TICK_SECONDS": "1"}
    celery = os.path.join(os.path.dirname(sys.executable), "celery")
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen(
            [
                celery,
                "-A",
                "quotaportal",
                "worker",
                "--without-gossip",
                "--without-mingle",
                "--beat",
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
                "--schedule",
                str(tmp_path / "beat"),
            ],
            cwd=repo,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        until(
            reported,
            "the worker to report itself",
        )
        for outage in range(OUTAGES):
            broker.stop()
            for n in range(OUTAGE_SECONDS * 5):  # people keep submitting meanwhile
                submit(people.alice, fleet, name=f"during-{outage}-{n}")
                time.sleep(0.2)
            assert worker.poll() is None, log_path.read_text()[-3000:]
            broker.start()  # empty: the outage lost what was queued
            until(
                reported,
                "the worker to report itself again",
            )
        back = timezone.now()
        until(
            lambda: SchedulerRun.objects.filter(started_at__gt=back, skipped=False).exists(),
            "the worker to run a tick again",
        )
        dispatched = Job.objects.exclude(status="RUNNABLE").count()
        assert dispatched == 4, "the queue's capacity is in use: the ticks ran through it all"
        assert worker.poll() is None, log_path.read_text()[-3000:]
        assert "Unrecoverable error" not in log_path.read_text()
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
        broker.stop()
