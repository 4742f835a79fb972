from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

REPO = Path(__file__).resolve().parent.parent

# In CI, property-based tests (hypothesis, schemathesis) draw the same examples every run, so a
# red build always means a change broke something; local runs keep exploring new examples.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")


CONTRACT_COPY = REPO / "scheduler" / "scenarios" / "contract"


def scenarios_dir() -> Path:
    """shared/scenarios beside the checkout (as laid out for developers and CI), if there."""
    return Path(os.environ.get("QP_SCENARIOS_DIR", REPO.parent / "shared" / "scenarios"))


def scenario_files() -> list[Path]:
    """The contract's scenarios: the repository's copy (`make sync-scenarios` refreshes it),
    and every file of shared/scenarios when that folder is beside the checkout, which wins
    for a name both have (it is the contract itself, and may hold more)."""
    by_name = {path.name: path for path in CONTRACT_COPY.glob("*.json")}
    by_name.update({path.name: path for path in scenarios_dir().glob("*.json")})
    if not by_name:
        # Never skip: a missing contract must turn the run red, not quietly green.
        raise RuntimeError(f"no scenario files in {CONTRACT_COPY} or {scenarios_dir()}")
    return [by_name[name] for name in sorted(by_name)]


def own_scenario_files() -> list[Path]:
    """The project's own scenarios (the AWS walkthrough, reservations), played like the shared
    ones: they extend the format (reserve steps) where the shared contract has no word."""
    return sorted((REPO / "scheduler" / "scenarios" / "examples").glob("*.json"))


def every_scenario_file() -> list[Path]:
    return scenario_files() + own_scenario_files()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A test database named for this run (test_quotaportal_<pid>), created and destroyed
    by this run alone: a second run beside it, on the same server, never drops it."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("postgresql"):
        database.setdefault("TEST", {})["NAME"] = f"test_{database['NAME']}_{os.getpid()}"


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _ticks_only_when_asked(settings):
    """Tests tick explicitly; the Celery test turns immediate ticks back on."""
    settings.QP_IMMEDIATE_TICKS = False
    yield
    from quotaportal.quotas import lookups
    from quotaportal.quotas.services import ticks

    # A test that queued a tick without a worker to take it leaves no claim for the next.
    ticks.gate._local.clear()
    ticks.gate._local_spacing.clear()
    ticks.gate._local_planned.clear()
    ticks._local_wakes.clear()  # wakes asked for without a broker, by eager ticks
    lookups.forget()  # the rows they were read from rolled back with the test
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


@dataclass
class Fleet:
    queue: object
    env: object
    vision: object  # LEND_AND_BORROW, limit 2 a100, in-share preemption
    nlp: object  # LEND, limit 2 a100


def build_queue(
    admin,
    *,
    unit: str = "a100",
    capacity: int = 4,
    backend: str = "SIMULATED",
    env_name: str = "sim",
    **queue_fields,
):
    """A capacity unit, a service environment of `capacity` units and job queue "gpu"."""
    from quotaportal.quotas import services

    services.create_capacity_unit(admin, name=unit)
    env = services.create_service_environment(
        admin, name=env_name, backend=backend, capacity_limits={unit: capacity}
    )
    policy = services.create_scheduling_policy(admin, name="fifo")
    queue = services.create_job_queue(
        admin, name="gpu", scheduling_policy=policy, service_environment=env, **queue_fields
    )
    return env, queue


def add_share(
    admin, queue, name: str, team: str, limit: int, strategy: str, *, unit: str = "a100", **fields
):
    from quotaportal.quotas import services
    from quotaportal.quotas.models import Team

    return services.create_share(
        admin,
        job_queue=queue,
        name=name,
        team=Team.objects.get(name=team),
        capacity_limits={unit: limit},
        sharing_strategy=strategy,
        **fields,
    )


@pytest.fixture
def fleet(people) -> Fleet:
    """4 x a100 on a SIMULATED environment, one queue, two teams' shares."""
    env, queue = build_queue(people.admin)
    vision = add_share(
        people.admin, queue, "vision", "vision", 2, "LEND_AND_BORROW", in_share_preemption=True
    )
    nlp = add_share(people.admin, queue, "nlp", "nlp", 2, "LEND")
    return Fleet(queue, env, vision, nlp)


def submit(user, fleet, share="vision", name="job", **fields):
    from quotaportal.quotas import services

    fields.setdefault("capacity_unit", "a100")
    return services.submit_job(user, job_queue=fleet.queue, quota_share=share, name=name, **fields)
