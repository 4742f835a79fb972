"""Many rows, each with its own values, updated in one statement; an update that gives back
the rows it changed; new rows stored at once.

Django's bulk_update writes a CASE per field and row: at a few rows it costs more to build
than to run, at a thousand more than the rows themselves. On PostgreSQL the values travel as
one array per column and the statement's text stays the same for any number of rows, so it is
prepared once per connection (settings: QP_DB_PREPARED_STATEMENTS). Other databases (SQLite,
the embedded default) use bulk_update.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import nullcontext
from functools import cache

from django.db import connection, connections
from django.db.models import Case, JSONField, Model, QuerySet, Value, When
from django.db.models.sql import UpdateQuery


def update_rows(model: type[Model], pks: list, values: dict[str, list], only_if: tuple = ()) -> int:
    """Set each row's fields: `values` maps a field's name (a foreign key's by its `_id`
    name) to its value per row, in the order of `pks`. The number of rows updated.

    `only_if`: (field, allowed values): a row whose field holds none of them keeps its own
    (a job that ended meanwhile is not marked started).
    """
    if not pks:
        return 0
    if connection.vendor != "postgresql":
        return _update_portably(model, pks, values, only_if)
    fields = tuple(values)
    columns = [model._meta.get_field(name) for name in fields]
    arrays = [list(pks)] + [
        _as_sent(column, values[name]) for name, column in zip(fields, columns, strict=True)
    ]
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
    """Store these new, unsaved instances of one model, as bulk_create does, with less of the
    ORM's work per value: a batch submit stores a thousand jobs and their events, and
    bulk_create spent more building its statement than the database took to store them. On
    PostgreSQL the rows go through COPY (even one row: end to end it beat INSERT … VALUES);
    elsewhere (SQLite) bulk_create stores them. A key the database assigns (an AutoField left empty)
    is not read back; a unique violation raises IntegrityError, as bulk_create's would."""
    if not objs:
        return
    model = type(objs[0])
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objs)
        return
    real = connection._connections[connection._alias]  # the proxy's lookup, done once
    fields = [
        field
        for field in model._meta.concrete_fields
        if not (field.primary_key and getattr(objs[0], field.attname) is None)
    ]
    quote = real.ops.quote_name
    into = f"{quote(model._meta.db_table)} ({', '.join(quote(f.column) for f in fields)})"
    rows = _rows_as_stored(objs, fields, real)
    sql = f"COPY {into} FROM STDIN"
    with real.cursor() as cursor:
        # Logged as a statement like any other when queries are (tests count them).
        logged = cursor.debug_sql(sql) if hasattr(cursor, "debug_sql") else nullcontext()
        with logged, real.wrap_database_errors, cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
    for obj in objs:
        obj._state.adding, obj._state.db = False, real.alias


def _rows_as_stored(objs: list[Model], fields: list, db) -> Iterator[list]:
    """Each object's values as the database takes them. Rows made alike (an array's children,
    a batch's events) share most values: a value that is the very object the row before had
    is converted once."""
    last_raw: list = [_UNSET] * len(fields)
    last_db: list = [None] * len(fields)
    for obj in objs:
        row = []
        for index, field in enumerate(fields):
            raw = field.pre_save(obj, True)
            if raw is not last_raw[index]:
                last_raw[index], last_db[index] = raw, field.get_db_prep_save(raw, db)
            row.append(last_db[index])
        yield row


_UNSET = object()


def update_returning(rows: QuerySet, returning: list[str], extra: str = "", **values) -> list:
    """`rows.update(**values)` that also gives back each updated row's `returning` fields
    (and `extra`, an SQL expression over the row, as the last item): one statement where a
    locked read and an update took two, on both databases (UPDATE … RETURNING; SQLite 3.35+).
    The rows a concurrent change took out of `rows`' filter are neither updated nor returned.
    """
    model, db = rows.model, connections[rows.db]
    query = rows.query.chain(UpdateQuery)
    query.add_update_values(values)
    compiler = query.get_compiler(rows.db)
    compiler.pre_sql_setup()  # as Django's own update: a filter across tables becomes pk IN
    sql, params = compiler.as_sql()
    fields = [model._meta.get_field(name) for name in returning]
    quote = db.ops.quote_name
    columns = [f"{quote(model._meta.db_table)}.{quote(f.column)}" for f in fields]
    with db.cursor() as cursor:
        cursor.execute(f"{sql} RETURNING {', '.join([*columns, *filter(None, [extra])])}", params)
        found = cursor.fetchall()
    return [
        (*(f.to_python(v) for f, v in zip(fields, row, strict=False)), *row[len(fields) :])
        for row in found
    ]


def per_row(values: dict, key: str = "pk", output_field=None):
    """One UPDATE's value per row (`values`: the row's `key` -> its value): the value itself
    when every row's is the same, else a CASE over the rows' `key`."""
    if len(set(values.values())) == 1:
        return next(iter(values.values()))
    return Case(
        *(When(**{key: pk}, then=Value(value)) for pk, value in values.items()),
        output_field=output_field,
    )
