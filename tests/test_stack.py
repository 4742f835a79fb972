"""The benchmarks' and the soak's stack (scripts/stack.py) leaves the servers as it found them."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

import redis

from tests.builders import REPO
from tests.hosts.builders import pid_alive, wait_until
from tests.workers import stack_module

# A run that starts one long-lived service and waits; it prints the service's pid, its Redis
# database, its run's name and its folder, then stops the stack in `finally`, as the
# benchmarks do.
RUN = """
import sys, time
sys.path.insert(0, "scripts")
import stack
run = stack.Stack("quotaportal_stack_test", prefix="qp-stack-test-")
try:
    run.start("service", ["sleep", "600"])
    print(run.processes["service"].pid, run.redis_url, run.run, run.dir, flush=True)
    time.sleep(600)
finally:
    run.stop()
"""


def test_a_kept_run_empties_its_redis_database_for_the_next_run():
    stack = stack_module()
    handler = signal.getsignal(signal.SIGTERM)
    kept = stack.Stack("quotaportal_stack_test", prefix="qp-stack-test-")
    try:
        store = redis.Redis.from_url(kept.redis_url)
        store.set("a-task-left-in-the-broker", 1)
        kept.stop(keep_data=True)
        assert store.dbsize() == 0, "kept runs would use up the 15 databases"
        assert signal.getsignal(signal.SIGTERM) == handler, "the process's own again"
    finally:
        kept.discard_data()
        shutil.rmtree(kept.dir, ignore_errors=True)


def test_a_run_ended_by_sigterm_stops_its_services_and_frees_its_redis_database():
    """`timeout` ends a benchmark with SIGTERM: its services (each in a session of its own)
    must not outlive it, nor its claim on a Redis database."""
    run = subprocess.Popen([sys.executable, "-c", RUN], cwd=REPO, stdout=subprocess.PIPE, text=True)
    pid, redis_url, name, folder = run.stdout.readline().split()
    store = redis.Redis.from_url(redis_url)
    try:
        assert store.dbsize() > 0, "the run holds its claim while it runs"
        run.send_signal(signal.SIGTERM)
        assert run.wait(30) == 128 + signal.SIGTERM
        wait_until(lambda: not pid_alive(int(pid)), timeout=10, what="the service to be stopped")
        assert store.dbsize() == 0, "the claim is released for the next run"
    finally:  # what a failure here would leave behind
        run.kill()
        run.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
        stack_module().leftovers.release_redis_database(redis_url, name)  # only if still its claim
        shutil.rmtree(folder, ignore_errors=True)


def test_what_a_run_killed_outright_leaves_goes_with_the_next_run():
    """`kill -9` of a benchmark runs no `finally`: its services die with it, and the next run
    sweeps its Redis database, its PostgreSQL database and its folder. A kept run's folder
    stays."""
    stack = stack_module()
    kept = stack.Stack("quotaportal_stack_test", prefix="qp-stack-test-")
    kept.stop(keep_data=True)  # its folder, with no database made
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    pid, redis_url, name, folder, database = run.stdout.readline().split()
    store = redis.Redis.from_url(redis_url)
    after = None
    try:
        run.kill()
        run.wait()
        wait_until(lambda: not pid_alive(int(pid)), timeout=10, what="the service to end with it")
        claim = stack.leftovers.CLAIM_KEY
        assert store.get(claim).decode().startswith(name), "still claimed, for now"
        after = stack.Stack("quotaportal_stack_test", prefix="qp-stack-test-")
        after.create_database()
        assert not os.path.exists(folder)
        assert os.path.isdir(kept.dir), "a kept run's folder is never swept"
        mark = store.get(claim)
        assert mark is None or not mark.decode().startswith(name), "its Redis database is free"
        assert database not in _databases(), "its PostgreSQL database is gone"
        assert after.database in _databases(), "the new run's own is there"
    finally:  # what a failure here would leave behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
        stack.leftovers.release_redis_database(redis_url, name)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(kept.dir, ignore_errors=True)
        if after is not None:
            after.stop()
        _drop(database)


# A run that claims its Redis database, creates its PostgreSQL database, starts one service
# and waits to be killed.
KILLED = """
import sys, time
sys.path.insert(0, "scripts")
import stack
run = stack.Stack("quotaportal_stack_test", prefix="qp-stack-test-")
run.create_database()
run.start("service", ["sleep", "600"])
pid = run.processes["service"].pid
print(pid, run.redis_url, run.run, run.dir, run.database, flush=True)
time.sleep(600)
"""


def _admin():
    import psycopg

    return psycopg.connect(
        os.environ["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres", autocommit=True
    )


def _databases() -> set[str]:
    with _admin() as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database")}


def _drop(database: str) -> None:
    with _admin() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
