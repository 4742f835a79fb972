"""Fail fast, with what to start, when the PostgreSQL or Redis the tests need is unreachable."""

from __future__ import annotations

import os
import sys

import psycopg
import redis


def main() -> int:
    problems = []
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        problems.append(
            f"DATABASE_URL must point at PostgreSQL for the tests, got {database_url!r}"
        )
    else:
        try:
            # The test database is created by the tests; the server's default one must answer.
            with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", connect_timeout=5):
                pass
        except psycopg.Error as err:
            problems.append(f"PostgreSQL at {database_url} is unreachable: {err}".strip())
    if not redis_url:
        problems.append("REDIS_URL is not set")
    else:
        try:
            redis.Redis.from_url(redis_url, socket_connect_timeout=5).ping()
        except redis.RedisError as err:
            problems.append(f"Redis at {redis_url} is unreachable: {err}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(
            "Start PostgreSQL and Redis (see docs/development/testing.md) and try again.",
            file=sys.stderr,
        )
        return 1
    print(f"services ok: PostgreSQL {database_url}, Redis {redis_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
