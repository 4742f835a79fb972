"""Every named resource takes the names AWS Batch takes, and refuses the rest with a rule."""

from __future__ import annotations

import pytest

from quotaportal.quotas import services
from quotaportal.quotas.errors import InvalidInput

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("name", ["a/quota-share/bX", "has space", "bang!", "x" * 129, ""])
def test_names_aws_would_refuse_are_refused_for_every_named_resource(people, name):
    """Policies, environments, queues and shares take AWS's names; units instance types."""
    unit = services.create_capacity_unit(people.admin, name="ml.g5.xlarge")
    policy = services.create_scheduling_policy(people.admin, name="fifo")
    env = services.create_service_environment(
        people.admin, name="env", capacity_limits={unit.name: 2}
    )
    queue = services.create_job_queue(
        people.admin, name="q", scheduling_policy=policy, service_environment=env
    )
    team = services.create_team(people.admin, name="team")
    attempts = {
        "scheduling policy": lambda: services.create_scheduling_policy(people.admin, name=name),
        "environment": lambda: services.create_service_environment(
            people.admin, name=name, capacity_limits={unit.name: 1}
        ),
        "queue": lambda: services.create_job_queue(
            people.admin, name=name, scheduling_policy=policy, service_environment=env
        ),
        "share": lambda: services.create_share(
            people.admin,
            job_queue=queue,
            name=name,
            team=team,
            capacity_limits={unit.name: 1},
            sharing_strategy="LEND",
        ),
        "capacity unit": lambda: services.create_capacity_unit(people.admin, name=name + " "),
    }
    for kind, attempt in attempts.items():
        with pytest.raises(InvalidInput) as err:
            attempt()
        assert "letters, digits" in err.value.errors["name"], kind
        assert len(err.value.errors["name"]) < 200, "a long name is not echoed in full"


def test_names_aws_allows_are_taken(people):
    unit = services.create_capacity_unit(people.admin, name="ml.g5.xlarge")
    policy = services.create_scheduling_policy(people.admin, name="-1")
    env = services.create_service_environment(
        people.admin, name="E_2-x", capacity_limits={unit.name: 1}
    )
    services.create_job_queue(
        people.admin, name="q" * 128, scheduling_policy=policy, service_environment=env
    )


def test_a_queue_holding_jobs_is_not_deleted_and_says_why(people, fleet):
    """A queue with job history is refused for what it is, not as a tick race to retry."""
    from quotaportal.quotas.errors import Conflict
    from tests.builders import submit

    submit(people.alice, fleet, name="kept")
    with pytest.raises(Conflict) as refused:
        services.delete_resource(people.admin, fleet.queue, "job queue")
    assert "holds 1 job(s)" in refused.value.message
    assert "disable it instead" in refused.value.message
    assert "try again" not in refused.value.message
