"""Every operation of the endpoint, keyed by its lower-case name as in `POST /v1/<name>`."""

from __future__ import annotations

from collections.abc import Callable

OPERATIONS: dict[str, Callable[[object, dict], dict]] = {}


def operation(name: str):
    """Register a handler `(actor, body) -> answer` for AWS operation `name`."""

    def register(handler):
        OPERATIONS[name.lower()] = handler
        return handler

    return register


# Importing the modules fills OPERATIONS.
from quotaportal.awsbatch.endpoint.operations import jobs, resources, shares, snapshot  # noqa: E402, F401
