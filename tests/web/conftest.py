"""Browser fixtures: Debian's chromium under Playwright, a small fleet, a scheduler loop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from quotaportal.tick.loop import SchedulerLoop
from tests.builders import add_share, build_queue
from tests.web.builders import PASSWORD

# Playwright's sync API keeps an asyncio loop in this thread; the ORM calls the tests make
# themselves are plain synchronous code, which Django allows once told so.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
CHROMIUM = os.environ.get("QP_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does it)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def small_fleet(people):
    """2 instances; one share whose jobs fill it, with in-share preemption on."""
    _, queue = build_queue(people.admin, capacity=2)
    add_share(people.admin, queue, "vision", "vision", 2, "LEND", in_share_preemption=True)
    for user in (people.admin, people.alice, people.bob):
        user.set_password(PASSWORD)
        user.save()
    return queue


@pytest.fixture
def scheduler():
    loop = SchedulerLoop(period=0.3)
    loop.start()
    yield loop
    loop.stop()
