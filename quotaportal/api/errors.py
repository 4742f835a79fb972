"""Map domain errors to DRF responses: 400 with field messages, 403, 404, 409."""

from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from quotaportal.quotas.errors import ServiceError


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        return Response(exc.errors, status=exc.status)
    return drf_exception_handler(exc, context)
