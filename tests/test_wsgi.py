"""A web worker loads what its first requests would need before it serves them, and freezes
what it loaded so the collector does not walk all of Django again mid-request."""

from __future__ import annotations

import json
import os
import subprocess
import sys

REPORT = """
import gc, json, sys
loaded_before = "quotaportal.api.jobs" in sys.modules
import quotaportal.wsgi
print(json.dumps({
    "views_before": loaded_before,
    "views": "quotaportal.api.jobs" in sys.modules,
    "web_views": "quotaportal.web.views" in sys.modules,
    "redis": "redis" in sys.modules,
    "frozen": gc.get_freeze_count(),
    "tracked": len(gc.get_objects()),
}))
"""


def load_wsgi(redis_url: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "quotaportal.settings", "REDIS_URL": redis_url}
    done = subprocess.run(
        [sys.executable, "-c", REPORT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_loading_the_wsgi_application_imports_every_view_and_the_redis_client():
    loaded = load_wsgi("redis://127.0.0.1:6379/15")
    assert not loaded["views_before"]
    assert loaded["views"]
    assert loaded["web_views"]
    assert loaded["redis"]


def test_without_redis_the_redis_client_is_not_loaded():
    assert not load_wsgi("")["redis"]


def test_what_was_loaded_is_frozen_out_of_later_collections():
    loaded = load_wsgi("")
    # Django, DRF and every view: far more objects than a request makes.
    assert loaded["frozen"] > 50_000
    assert loaded["tracked"] < loaded["frozen"] / 10
