"""The domain reaches backends only through quotas.backends, and each backend registers
itself for its `Backend` value. That quotas imports no backend is an import contract
(pyproject.toml, tests/test_import_contracts.py)."""

from __future__ import annotations

import pytest

from quotaportal.quotas.backends import EnvironmentBackend, backend_for
from quotaportal.quotas.models import Backend, ServiceEnvironment


@pytest.mark.parametrize(
    ("backend", "implementation"),
    [
        ("SIMULATED", "SimulatedBackend"),
        ("LOCAL", "LocalBackend"),
        ("AWS_BATCH", "AwsBatchBackend"),
    ],
)
def test_each_backend_is_found_through_the_registry(backend, implementation):
    found = backend_for(ServiceEnvironment(name="e", backend=backend))
    assert isinstance(found, EnvironmentBackend)
    assert type(found).__name__ == implementation


def test_an_environment_whose_backend_has_no_implementation_runs_nothing():
    found = backend_for(ServiceEnvironment(name="e", backend="NOT_REGISTERED"))
    assert type(found) is EnvironmentBackend
    assert found.launch(None, ["job"], None) == []
    assert found.schedules_itself is False
    assert Backend.LOCAL in Backend.values


def test_only_the_aws_backend_leaves_scheduling_to_its_own_scheduler():
    schedules_itself = {
        backend: backend_for(ServiceEnvironment(name="e", backend=backend)).schedules_itself
        for backend in Backend.values
    }
    assert schedules_itself == {
        "LOCAL": False,
        "SIMULATED": False,
        "SLURM": False,  # the portal decides, Slurm only places and runs
        "AWS_BATCH": True,
    }
