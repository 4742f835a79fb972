"""Domain errors raised by services; every interface maps them to its own error shape.

REST: InvalidInput 400 (field messages), Forbidden 403, NotFound 404, Conflict 409.
"""

from __future__ import annotations


class ServiceError(Exception):
    status = 400

    def __init__(self, message: str | dict[str, str]):
        self.errors = message if isinstance(message, dict) else {"detail": message}
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if set(self.errors) == {"detail"}:
            return self.errors["detail"]
        return "; ".join(f"{field}: {text}" for field, text in self.errors.items())


class InvalidInput(ServiceError):
    status = 400


class Forbidden(ServiceError):
    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409
