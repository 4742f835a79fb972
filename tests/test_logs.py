"""The development server's console keeps what a person reads: agents' heartbeats and
reports and the live pages' refreshes go quiet when they succeed, failures always show."""

from __future__ import annotations

import logging

import pytest

from quotaportal.logs import QuietAgentRequests


def request_line(path: str, status: int) -> logging.LogRecord:
    record = logging.LogRecord(
        "django.server",
        logging.INFO,
        __file__,
        1,
        '"%s" %s 0',
        (f"GET {path} HTTP/1.1", status),
        None,
    )
    record.status_code = status
    return record


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/agent/heartbeat/",
        "/api/v1/agent/reports/",
        "/?queue=gpu-queue&since=abc",
        "/jobs/6c1e/?since=xyz",
    ],
)
def test_routine_requests_are_quiet_and_their_failures_are_not(path):
    quiet = QuietAgentRequests()
    assert not quiet.filter(request_line(path, 200))
    assert quiet.filter(request_line(path, 500))


def test_a_person_s_requests_still_show():
    assert QuietAgentRequests().filter(request_line("/jobs/", 200))
    assert QuietAgentRequests().filter(request_line("/api/v1/jobs/", 201))
