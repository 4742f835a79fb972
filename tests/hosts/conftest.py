"""Fixtures of the host tests."""

from __future__ import annotations

import time

import pytest

from quotaportal.hosts.services import long_polls
from quotaportal.infra import wakeups


@pytest.fixture(autouse=True)
def _no_long_poll_outlives_its_test():
    """A heartbeat still waiting when its test ends is told to return: its slot would count
    against the next test, whose hosts and tokens reuse the same ids."""
    yield
    with long_polls._lock:
        for waiter in long_polls._waiting.values():
            waiter.superseded = True
    wakeups.nudge()
    deadline = time.monotonic() + 5
    while long_polls.waiting_count() and time.monotonic() < deadline:
        time.sleep(0.02)
