"""The domain reaches backends only through quotas.backends: quotas imports no backend, and
each backend registers itself for its `Backend` value."""

from __future__ import annotations

import ast

import pytest

from quotaportal.quotas.backends import EnvironmentBackend, backend_for
from quotaportal.quotas.models import Backend, ServiceEnvironment

BACKEND_PACKAGES = ("quotaportal.hosts", "quotaportal.awsbatch")  # and every later backend


def imported_modules(path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_quotas_imports_no_backend(repo):
    offenders = [
        f"{path.relative_to(repo)} imports {module}"
        for path in (repo / "quotaportal" / "quotas").rglob("*.py")
        for module in imported_modules(path)
        if module.startswith(BACKEND_PACKAGES)
    ]
    assert offenders == []


def test_the_boundary_check_sees_an_import_when_there_is_one(tmp_path):
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("def f():\n    from quotaportal.hosts.services import heartbeat\n")
    assert "quotaportal.hosts.services" in imported_modules(sneaky)


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
    assert schedules_itself == {"LOCAL": False, "SIMULATED": False, "AWS_BATCH": True}
