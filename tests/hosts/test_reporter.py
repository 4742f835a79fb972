"""The agent's reporter: an exit goes at once, carrying the reports before it; a start or some
output waits (up to LINGER) for an exit to ride with; draining sends what waits at once."""

from __future__ import annotations

import threading
import time

import pytest

from quotaportal.hosts.agent import reporter as reporter_module
from quotaportal.hosts.agent.reporter import Reporter


class RecordingClient:
    """Stands in for the HTTP client: keeps each request's reports, answers every one ok."""

    def __init__(self):
        self.requests: list[list[dict]] = []
        self.arrived = threading.Event()

    def reports(self, name: str, batch: list[dict]) -> dict:
        self.requests.append([(r["placement"], r["event"]) for r in batch])
        self.arrived.set()
        return {"results": [{"ok": True} for _ in batch]}


@pytest.fixture
def lingering(monkeypatch):
    """A linger long enough that anything sent before it ends was sent for another reason."""
    monkeypatch.setattr(reporter_module, "LINGER", 30.0)
    client = RecordingClient()
    reporter = Reporter(client, "gpu-1")
    yield client, reporter
    reporter.close()


def test_an_exit_goes_at_once_with_the_start_before_it(lingering):
    client, reporter = lingering
    reporter.put({"placement": 7, "event": "started"})
    reporter.put({"placement": 7, "event": "exited", "exit_code": 0})
    assert client.arrived.wait(timeout=10)
    assert client.requests == [[(7, "started"), (7, "exited")]]


def test_a_start_alone_waits_for_an_exit_to_ride_with(lingering):
    client, reporter = lingering
    reporter.put({"placement": 7, "event": "started"})
    reporter.put({"placement": 8, "event": "output", "output_tail": "epoch 1"})
    assert not client.arrived.wait(timeout=0.3)
    reporter.put({"placement": 9, "event": "exited", "exit_code": 1})
    assert client.arrived.wait(timeout=10)
    assert client.requests == [[(7, "started"), (8, "output"), (9, "exited")]]


def test_a_start_goes_by_itself_once_it_has_waited_long_enough(monkeypatch):
    monkeypatch.setattr(reporter_module, "LINGER", 0.2)
    client = RecordingClient()
    reporter = Reporter(client, "gpu-1")
    try:
        put_at = time.monotonic()
        reporter.put({"placement": 7, "event": "started"})
        assert client.arrived.wait(timeout=10)
        assert time.monotonic() - put_at >= 0.2
        assert client.requests == [[(7, "started")]]
    finally:
        reporter.close()


def test_draining_sends_what_waits_without_lingering(lingering):
    client, reporter = lingering
    reporter.put({"placement": 7, "event": "started"})
    assert reporter.drain(timeout=10)
    assert client.requests == [[(7, "started")]]
