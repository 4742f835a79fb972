"""Errors answered in the format of the interface that was asked: JSON on the REST API and
for probes, AWS's error shape on the AWS-compatible endpoint, a page of the product
elsewhere.

An outage is not the client's fault and says so: with the database (or Redis) down, every
request gets a 503 that names what is unavailable, with Retry-After, instead of a bare
"Server Error (500)". A body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 before any view reads
it.
"""

from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.utils.html import format_html

from quotaportal.quotas.names import shortened

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
DATABASE_DOWN = "the database is unavailable; nothing was changed, try again in a few seconds"
REDIS_DOWN = "the message broker (Redis) is unavailable; try again in a few seconds"


def outage_of(exc: BaseException | None) -> str | None:
    """What is unavailable, when `exc` says a service is down (None for a plain bug)."""
    if isinstance(exc, OperationalError | InterfaceError):
        return DATABASE_DOWN
    # Only a process that loaded the Redis client can meet its errors (the embedded mode,
    # without REDIS_URL, never loads it).
    if "redis" in sys.modules:
        from redis.exceptions import ConnectionError, TimeoutError

        if isinstance(exc, ConnectionError | TimeoutError):
            return REDIS_DOWN
    return None


def interface_of(request: HttpRequest) -> str:
    path = request.path
    if path.startswith("/aws/batch/"):
        return "aws"
    if path.startswith(("/api/", "/healthz", "/metrics")):
        return "json"
    return "page"


def error_response(
    request: HttpRequest, status: int, message: str, aws_code: str = "ClientException"
) -> HttpResponse:
    interface = interface_of(request)
    if interface == "aws":
        response = JsonResponse({"__type": aws_code, "message": message}, status=status)
        response["x-amzn-ErrorType"] = aws_code
    elif interface == "json":
        response = JsonResponse({"detail": message}, status=status)
    else:
        response = error_page(request, status, message)
    if status == 503:
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def error_page(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """A page of the product with the message; without the signed-in navigation when the
    database is what failed (the navigation would ask it who the user is)."""
    template = loader.select_template([f"{status}.html", "error.html"])
    html = template.render({"status": status, "message": message, "request": request})
    return HttpResponse(html, status=status)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: an outage is a 503 that says what is down; anything else a 500 in the
    interface's format, without details (they are in the log)."""
    exc = sys.exc_info()[1]
    if outage := outage_of(exc):
        return error_response(request, 503, outage, "ServerException")
    return error_response(
        request, 500, "something went wrong on our side; it has been logged", "ServerException"
    )


def forbidden(request: HttpRequest, exception=None) -> HttpResponse:
    """handler403: a page of the product, with the navigation and the reason, or the
    interface's JSON."""
    reason = str(exception or "") or "you are not allowed to do this"
    if interface_of(request) != "page":
        return error_response(request, 403, reason, "AccessDeniedException")
    return _product_page(
        request, 403, "Not allowed", f"You cannot open this page: {reason.rstrip('.')}."
    )


def not_found(request: HttpRequest, exception=None) -> HttpResponse:
    """handler404: a page of the product that says what is missing (its address shortened),
    or the interface's JSON."""
    if interface_of(request) != "page":
        return error_response(request, 404, "not found", "ClientException")
    message = (
        f"There is no page at {shortened(request.path, 80)}: check the address, or start "
        "again from the links."
    )
    return _product_page(request, 404, "Not found", message)


def _product_page(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    """A signed-in page with the navigation; for an htmx request the message alone, for its
    target: never a whole page inside it."""
    if request.headers.get("HX-Request"):
        html = format_html('<p class="error" role="alert">{}</p>', message)
        return HttpResponse(html, status=status)
    context = {"title": title, "message": message}
    return render(request, "web/http_error.html", context, status=status)


def too_large(limit: int, length: int | None = None) -> str:
    """The 413's message; `length` is unknown for a body sent in chunks."""
    size = "over the limit" if length is None else f"{length:,} bytes"
    return f"the request body is {size}; at most {limit:,} are accepted"


class RequestLimitsMiddleware:
    """A body larger than the server takes is answered 413 at once, in the interface's format,
    and an outage met anywhere in the request (middleware included) is a 503."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        length = request.META.get("CONTENT_LENGTH") or "0"
        if limit is not None and length.isdigit() and int(length) > limit:
            return error_response(request, 413, too_large(limit, int(length)))
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        outage = outage_of(exc)
        if outage is None:
            return None
        if isinstance(exc, DatabaseError):
            log.warning("database unavailable during %s %s: %s", request.method, request.path, exc)
        return error_response(request, 503, outage, "ServerException")
