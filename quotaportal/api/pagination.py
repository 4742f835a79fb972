"""Limit/offset pagination with bounds the database can hold."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 10**9  # far past any real table; keeps huge values out of SQL's bigint


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = 100
    max_limit = 1000

    def get_offset(self, request):
        return min(super().get_offset(request), MAX_OFFSET)
