"""Correlated aggregates: one value per outer row, computed by the database in the same
statement (instead of a second query, or one per row)."""

from __future__ import annotations

from django.db.models import QuerySet, Subquery


def per_outer_row(rows: QuerySet, aggregate, by: str) -> Subquery:
    """`aggregate` (Count, Max, ...) over `rows`, a queryset filtered on the outer row (with
    OuterRef) whose rows all share the value of `by`; NULL when there are none."""
    return Subquery(rows.order_by().values(by).annotate(value=aggregate).values("value")[:1])
