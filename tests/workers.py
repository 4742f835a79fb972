"""A real Celery worker (with its beat) on a Redis database of the test's own: for the tests
that need the whole asynchronous path."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from celery import Celery
from django.db import connection

TICK = "quotaportal.quotas.tasks.tick_queue_now"
# No beat task comes due while a test runs: the only messages are the ones it sends.
QUIET = {
    "QP_TICK_SECONDS": "600",
    "QP_ESTIMATE_SECONDS": "600",
    "QP_FULL_PLAN_CHECK_SECONDS": "600",
    "QP_USAGE_ROLLUP_SECONDS": "600",
    "QP_NOTIFY_SWEEP_SECONDS": "600",
    "QP_IMMEDIATE_TICKS": "0",
    "QP_REDIS_PREFIX": "routed",
}


def deployment(broker: str) -> Celery:
    """The portal's own Celery settings (routes included), on this test's broker."""
    app = Celery(set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.broker_url = broker
    app.conf.broker_transport_options = {"global_keyprefix": "routed:celery:"}
    return app


def stack_module():
    import importlib.util

    from tests.builders import REPO

    spec = importlib.util.spec_from_file_location("qp_stack", REPO / "scripts" / "stack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def worker_with_beat(repo, tmp_path, broker_url, *options, **settings):
    """A solo worker with an embedded beat on this test's database (`options` added to its
    command); yields its process and, once it has stopped, its output in `log`."""
    database = os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/" + connection.settings_dict["NAME"]
    env = {**os.environ, "DATABASE_URL": database, "REDIS_URL": broker_url, **settings}
    celery = os.path.join(os.path.dirname(sys.executable), "celery")
    # Its output goes to a file: a pipe nobody reads while the test runs fills up after a
    # minute of INFO lines, and the worker then blocks on its next log line.
    output_path = tmp_path / "worker.log"
    output_file = output_path.open("w")
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
            *options,
        ],
        cwd=repo,
        env=env,
        stdout=output_file,
        stderr=subprocess.STDOUT,
        # A group of its own: the embedded beat is a child process, and stopping (or killing)
        # the worker must stop it too, or it holds the output pipe open.
        start_new_session=True,
    )
    log = []
    try:
        yield worker, log
    finally:
        _signal_group(worker, signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _signal_group(worker, signal.SIGKILL)
            worker.wait()
        output_file.close()
        log.append(output_path.read_text())


def kill_hard(worker) -> None:
    """kill -9 of the worker and its beat, as a crash or the OOM killer would."""
    _signal_group(worker, signal.SIGKILL)
    worker.wait()


def _signal_group(worker, signum) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signum)


def wait_for(worker, done, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done():
        assert worker.poll() is None, "the worker exited early"
        time.sleep(0.2)
