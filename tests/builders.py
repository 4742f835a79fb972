"""Builders the tests share."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from quotaportal.quotas import services

REPO = Path(__file__).resolve().parent.parent


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


def submit(user, fleet, share="vision", name="job", **fields):

    fields.setdefault("capacity_unit", "a100")
    return services.submit_job(user, job_queue=fleet.queue, quota_share=share, name=name, **fields)


TOKEN = "scrape-secret-123"


def samples(text: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(found, name, **labels) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def another_queue(
    admin,
    *,
    name: str,
    unit: str,
    capacity: int,
    backend: str,
    share: str,
    team: str,
    strategy: str,
    queue_name: str | None = None,
):
    """A second environment `name` of `capacity` × a new `unit`, its queue (`queue_name`, else
    `name`; under the existing "fifo" policy) and one share of all of it for `team`."""
    from quotaportal.quotas.models import SchedulingPolicy

    services.create_capacity_unit(admin, name=unit)
    env = services.create_service_environment(
        admin, name=name, backend=backend, capacity_limits={unit: capacity}
    )
    queue = services.create_job_queue(
        admin,
        name=queue_name or name,
        scheduling_policy=SchedulingPolicy.objects.get(name="fifo"),
        service_environment=env,
    )
    add_share(admin, queue, share, team, capacity, strategy, unit=unit)
    return queue


# -- fair share -------------------------------------------------------------------------------


def fair_borrowers(admin):
    """4 × a100 in queue "gpu": nlp's owner share lends 2; vision and speech (both of team
    vision) each hold 1 and may borrow."""
    _, queue = build_queue(admin)
    add_share(admin, queue, "owner", "nlp", 2, "LEND")
    add_share(admin, queue, "vision", "vision", 1, "LEND_AND_BORROW")
    add_share(admin, queue, "speech", "vision", 1, "LEND_AND_BORROW")
    return queue


def borrowed_yesterday(share: str, hours: float) -> None:
    """The usage rows of a share that borrowed `hours` instance-hours a day ago."""
    from django.utils import timezone

    from quotaportal.quotas.models import Team
    from quotaportal.usage.models import HOUR, UsageHour

    hour = (timezone.now() - timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    UsageHour.objects.create(
        hour=hour,
        span=HOUR,
        job_queue="gpu",
        quota_share=share,
        team=Team.objects.get(name="vision").name,
        user="alice",
        unit="a100",
        instance_seconds=hours * 3600,
        borrowed_instance_seconds=hours * 3600,
    )


def wants_to_borrow(people, queue) -> tuple:
    """Each borrower holds its own GPU; then vision, and after it speech, want 2 more; a
    tick after each. The two jobs that want more, as the ticks left them."""
    from quotaportal.tick.run import run_tick

    for share in ("vision", "speech"):
        services.submit_job(
            people.alice, job_queue=queue, quota_share=share, name=f"{share}-own",
            capacity_unit="a100", simulated_duration_seconds=3600,
        )  # fmt: skip
    run_tick(queue.id)
    vision = services.submit_job(
        people.alice, job_queue=queue, quota_share="vision", name="vision-more",
        capacity_unit="a100", quantity=2,
    )  # fmt: skip
    speech = services.submit_job(
        people.alice, job_queue=queue, quota_share="speech", name="speech-more",
        capacity_unit="a100", quantity=2,
    )  # fmt: skip
    run_tick(queue.id)
    vision.refresh_from_db()
    speech.refresh_from_db()
    return vision, speech
