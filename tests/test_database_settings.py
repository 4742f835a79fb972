"""On PostgreSQL the server binds parameters and a repeated statement is prepared, so the hot
paths are planned once per connection; QP_DB_PREPARED_STATEMENTS=0 turns it off."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.db import connection

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith("postgres"),
        reason="prepared statements are PostgreSQL's",
    ),
]


def prepared(marker: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", [f"%{marker}%"]
        )
        return cursor.fetchone()[0]


def test_a_statement_run_twice_on_a_connection_is_prepared_with_its_parameters_apart():
    statement = "SELECT %s::int + 1 AS prepared_marker"
    with connection.cursor() as cursor:
        cursor.execute(statement, [1])
        assert prepared("prepared_marker") == 0
        for value in (2, 3):
            cursor.execute(statement, [value])
            assert cursor.fetchone()[0] == value + 1
    assert prepared("prepared_marker") == 1


def test_prepared_statements_can_be_turned_off_for_a_pooler():
    show = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'quotaportal.settings'; "
        "django.setup(); from django.conf import settings; "
        "print(settings.DATABASES['default'].get('OPTIONS', {}))"
    )
    env = {**os.environ, "QP_DB_PREPARED_STATEMENTS": "0"}
    off = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True)
    assert off.returncode == 0, off.stderr
    assert "server_side_binding" not in off.stdout
    env["QP_DB_PREPARED_STATEMENTS"] = "1"
    on = subprocess.run([sys.executable, "-c", show], env=env, capture_output=True, text=True)
    assert "'server_side_binding': True" in on.stdout
