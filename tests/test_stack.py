"""The benchmarks' and the soak's stack (scripts/stack.py) leaves the servers as it found them."""

from __future__ import annotations

import shutil

import redis

from tests.workers import stack_module


def test_a_kept_run_empties_its_redis_database_for_the_next_run():
    stack = stack_module()
    kept = stack.Stack("quotaportal_stack_test", prefix="qp-stack-test-")
    try:
        store = redis.Redis.from_url(kept.redis_url)
        store.set("a-task-left-in-the-broker", 1)
        kept.stop(keep_data=True)
        assert store.dbsize() == 0, "kept runs would use up the 15 databases"
    finally:
        kept.discard_data()
        shutil.rmtree(kept.dir, ignore_errors=True)
