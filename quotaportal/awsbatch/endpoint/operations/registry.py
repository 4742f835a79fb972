"""The operations the endpoint answers, keyed by lower-case name as in `POST /v1/<name>`:
each module of this package registers its handlers here as it loads."""

from __future__ import annotations

from collections.abc import Callable

OPERATIONS: dict[str, Callable[[object, dict], dict]] = {}


def operation(name: str):
    """Register a handler `(actor, body) -> answer` for AWS operation `name`."""

    def register(handler):
        OPERATIONS[name.lower()] = handler
        return handler

    return register
