"""Map domain errors to DRF responses: 400 with field messages, 403, 404, 409."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from quotaportal.quotas.errors import ServiceError


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        # The same shape as DRF's validation errors: a field maps to a list of messages, and
        # "detail" (about the request as a whole) to one message.
        body = {
            field: message if field == "detail" or isinstance(message, list) else [message]
            for field, message in exc.errors.items()
        }
        return Response(body, status=exc.status)
    return drf_exception_handler(exc, context)
