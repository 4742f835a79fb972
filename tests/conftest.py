from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from _pytest.nodeid import NodeId  # pytest 9: a test's id, which pytest-xdist groups by
from django.conf import settings as django_settings
from hypothesis import settings as hypothesis_settings

from tests.builders import (
    REPO,
    Fleet,
    add_share,
    build_queue,
)

# In CI, property-based tests (hypothesis, schemathesis) draw the same examples every run, so a
# red build always means a change broke something; local runs keep exploring new examples.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

# The Redis keys and channels of this run (tick marks, the configuration's generation,
# wake-ups) carry a prefix of its own, here and in the processes it starts: a second run on
# the same Redis database (REDIS_URL's) neither sees nor clears them.
os.environ.setdefault("QP_REDIS_PREFIX", f"quotaportal-test-{os.getpid()}")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # A worker of a parallel run (pytest-xdist) inherits its controller's prefix: each worker
    # is a run of its own (its own test database too), so it takes a prefix of its own.
    os.environ["QP_REDIS_PREFIX"] = f"quotaportal-test-{os.getpid()}"
if django_settings.configured:  # pytest-django may have loaded the settings before this file
    django_settings.QP_REDIS_PREFIX = os.environ["QP_REDIS_PREFIX"]
    django_settings.CELERY_BROKER_TRANSPORT_OPTIONS = {
        **django_settings.CELERY_BROKER_TRANSPORT_OPTIONS,
        "global_keyprefix": f"{os.environ['QP_REDIS_PREFIX']}:celery:",
    }


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A test database named for this run (test_quotaportal_<pid>), created and destroyed
    by this run alone: a second run beside it, on the same server, never drops it."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql"):
        database.setdefault("TEST", {})["NAME"] = f"test_{database['NAME']}_{os.getpid()}"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, and before it drops the test database, the sessions some test left
    open on it, named with the last statement each ran: the drop fails while one is open
    (a warning, "being accessed by other users"), and this says whose it is."""
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, state, backend_start, left(query, 300) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        left_open = cursor.fetchall()
    for pid, state, began, query in left_open:
        warnings.warn(
            f"a session left open on the test database: pid {pid}, {state}, since {began}, "
            f"last ran: {query}",
            stacklevel=1,
        )


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _ticks_only_when_asked(settings):
    """Tests tick and deliver notifications explicitly; the Celery tests turn both back on."""
    settings.QP_IMMEDIATE_TICKS = False
    settings.QP_NOTIFY_AFTER_COMMIT = False
    yield
    from quotaportal.quotas import config_cache
    from quotaportal.tick import requests as ticks

    # A test that queued a tick without a worker to take it leaves no claim for the next.
    ticks.gate._local.clear()
    ticks.gate._local_spacing.clear()
    ticks.gate._local_planned.clear()
    ticks._local_wakes.clear()  # wakes asked for without a broker, by eager ticks
    config_cache.forget()  # the rows they were read from rolled back with the test
    ticks._environments.clear()


@dataclass
class People:
    admin: object
    alice: object  # member of team vision
    bob: object  # member of team nlp
    tokens: dict


@pytest.fixture
def people(db) -> People:
    from quotaportal.quotas import services

    admin, admin_token = services.create_user("ada", admin=True)
    alice, alice_token = services.create_user("alice", teams=["vision"])
    bob, bob_token = services.create_user("bob", teams=["nlp"])
    return People(admin, alice, bob, {"ada": admin_token, "alice": alice_token, "bob": bob_token})


@pytest.fixture
def fleet(people) -> Fleet:
    """4 x a100 on a SIMULATED environment, one queue, two teams' shares."""
    env, queue = build_queue(people.admin)
    vision = add_share(
        people.admin, queue, "vision", "vision", 2, "LEND_AND_BORROW", in_share_preemption=True
    )
    nlp = add_share(people.admin, queue, "nlp", "nlp", 2, "LEND")
    return Fleet(queue, env, vision, nlp)


@pytest.fixture
def broker():
    """An empty Redis database claimed for this test (so stale messages from elsewhere never
    interfere), emptied afterwards; nobody else's is flushed."""
    from tests.workers import stack_module

    stack = stack_module()
    run = f"test-celery-{os.getpid()}"
    url = stack.leftovers.claim_redis_database(os.environ["REDIS_URL"], run)
    yield url
    stack.leftovers.release_redis_database(url, run)


def pytest_collection_modifyitems(items):
    """In a parallel run (`-n 2 --dist loadgroup`, as `make test` runs), a module's tests stay
    on one worker (its module-scoped fixtures are made once), and every test of the SLURM
    backend on one worker too: they share one throwaway Slurm per worker, and two of them
    beside each other on two cores make their timed waits race each other.

    pytest-xdist reads a test's group from the end of its id (`…::test@group`); it writes that
    itself from `xdist_group` marks into an attribute pytest 9 no longer reads, so the ids are
    written here. Each test also gets an id of its own: schemathesis gives every API
    operation's test the same one, and a parallel run would run one of them and drop the rest.
    """
    on_sqlite = "sqlite" in django_settings.DATABASES["default"]["ENGINE"]
    for item in items:
        if on_sqlite and item.get_closest_marker("postgresql"):
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL (the SQLite lane)"))
        if "::" not in item.nodeid:
            continue
        head = item.nodeid.rpartition("::")[0]
        path = head.split("::")[0]
        group = "slurm" if path.startswith("tests/slurm/") else path
        suffix = f"@{group}" if os.environ.get("PYTEST_XDIST_WORKER") else ""
        item._id = NodeId.parse(f"{head}::{item.name}{suffix}")
    counted = Counter(item.nodeid for item in items)
    if twice := sorted(nodeid for nodeid, n in counted.items() if n > 1):
        raise pytest.UsageError(
            f"tests share an id (a parallel run keeps one of them): {twice[:5]}"
        )
