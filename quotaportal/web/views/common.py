"""Helpers shared by the web views: service errors to responses, pagination."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator

from quotaportal.quotas.errors import Forbidden

PAGE_SIZE = 25


def forbid_on(err: Forbidden):
    """A service refused: the web answers 403 with the service's words."""
    raise PermissionDenied(err.message)


def paginate(request, queryset, size: int = PAGE_SIZE):
    return Paginator(queryset, size).get_page(request.GET.get("page"))


def query_without_page(request) -> str:
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()
