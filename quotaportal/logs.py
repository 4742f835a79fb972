"""Logging helpers: keep the development server's console readable."""

from __future__ import annotations

import logging

AGENT_PATHS = ("/api/v1/agent/heartbeat/", "/api/v1/agent/report/", "/api/v1/agent/reports/")
POLL_MARK = "since="  # the live pages' refreshes (dashboard, job page) ask what changed since


class QuietAgentRequests(logging.Filter):
    """Agents heartbeat and report every second or so, and open pages refresh every 2 s:
    their successful requests are DEBUG, not console lines that bury everything else
    (failures still show)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) >= 400:
            return True
        message = record.getMessage()
        if any(path in message for path in AGENT_PATHS) or POLL_MARK in message:
            return logging.getLogger("quotaportal.agents").isEnabledFor(logging.DEBUG)
        return True
