"""Many rows, each with its own values, updated in one statement.

Django's bulk_update writes a CASE per field and row: at a few rows it costs more to build
than to run, at a thousand more than the rows themselves. On PostgreSQL the values travel as
one array per column and the statement's text stays the same for any number of rows, so it is
prepared once per connection (settings: QP_DB_PREPARED_STATEMENTS). Other databases (SQLite,
the embedded default) use bulk_update.
"""

from __future__ import annotations

import json
from functools import cache

from django.db import connection
from django.db.models import JSONField, Model


def update_rows(model: type[Model], pks: list, values: dict[str, list], only_if: tuple = ()) -> int:
    """Set each row's fields: `values` maps a field's name to its value per row, in the order
    of `pks`. The number of rows updated.

    `only_if`: (field, allowed values): a row whose field holds none of them keeps its own
    (a job that ended meanwhile is not marked started).
    """
    if not pks:
        return 0
    if connection.vendor != "postgresql":
        return _update_portably(model, pks, values, only_if)
    fields = tuple(values)
    columns = [model._meta.get_field(name) for name in fields]
    arrays = [list(pks)] + [_as_sent(column, values[column.name]) for column in columns]
    if only_if:
        arrays.append(list(only_if[1]))
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(model, fields, only_if[0] if only_if else ""), arrays)
        return cursor.rowcount


def _as_sent(column, values: list) -> list:
    """A column's values as the array carries them: JSON as its text (cast to jsonb by the
    statement); the rest as they are, which psycopg adapts (a tick may send 100k of them)."""
    if isinstance(column, JSONField):
        return [None if v is None else json.dumps(v, cls=column.encoder) for v in values]
    return list(values)


def update_objects(objs: list[Model], fields: list[str], only_if: tuple = ()) -> int:
    """update_rows for model instances: write `fields` of each of `objs` to its row."""
    if not objs:
        return 0
    values = {name: [getattr(obj, name) for obj in objs] for name in fields}
    return update_rows(type(objs[0]), [obj.pk for obj in objs], values, only_if)


@cache
def _update_sql(model: type[Model], fields: tuple[str, ...], condition_field: str) -> str:
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    quote = connection.ops.quote_name
    key = quote(meta.pk.column)
    assignments = ", ".join(f"{quote(c.column)} = v.{quote(c.column)}" for c in columns[1:])
    arrays = ", ".join(f"%s::{c.db_type(connection)}[]" for c in columns)
    names = ", ".join(quote(c.column) for c in columns)
    sql = (
        f"UPDATE {quote(meta.db_table)} AS t SET {assignments} "
        f"FROM unnest({arrays}) AS v({names}) WHERE t.{key} = v.{key}"
    )
    if condition_field:
        condition = meta.get_field(condition_field)
        sql += f" AND t.{quote(condition.column)} = ANY(%s::{condition.db_type(connection)}[])"
    return sql


def _update_portably(model: type[Model], pks: list, values: dict, only_if: tuple) -> int:
    rows = model.objects.all()
    if only_if:
        rows = rows.filter(**{f"{only_if[0]}__in": only_if[1]})
    objs = [
        model(pk=pk, **{name: column[index] for name, column in values.items()})
        for index, pk in enumerate(pks)
    ]
    return rows.bulk_update(objs, list(values), batch_size=500)


def insert_new(objs: list[Model]) -> None:
    """Store these new, unsaved instances of one model, as bulk_create does. On PostgreSQL
    through COPY: a batch submit stores a thousand jobs and their events, and bulk_create
    spent more building its statement (each value of each row through the ORM) than the
    database took to store them. A key the database assigns (an AutoField left empty) is
    not read back; a unique violation raises IntegrityError, as bulk_create's would."""
    if not objs:
        return
    model = type(objs[0])
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objs)
        return
    fields = [
        field
        for field in model._meta.concrete_fields
        if not (field.primary_key and getattr(objs[0], field.attname) is None)
    ]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    sql = f"COPY {quote(model._meta.db_table)} ({columns}) FROM STDIN"
    real = connection._connections[connection._alias]  # the proxy's lookup, done once
    with (
        real.cursor() as cursor,
        real.wrap_database_errors,
        cursor.cursor.copy(sql) as copy,
    ):
        # Rows made alike (an array's children, a batch's events) share most values: a value
        # that is the very object the row before had is converted once.
        last_raw: list = [_UNSET] * len(fields)
        last_db: list = [None] * len(fields)
        for obj in objs:
            row = []
            for index, field in enumerate(fields):
                raw = field.pre_save(obj, True)
                if raw is not last_raw[index]:
                    last_raw[index], last_db[index] = raw, field.get_db_prep_save(raw, real)
                row.append(last_db[index])
            copy.write_row(row)
    for obj in objs:
        obj._state.adding, obj._state.db = False, real.alias


_UNSET = object()
