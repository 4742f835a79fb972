"""Logging helpers: keep the development server's console readable."""

from __future__ import annotations

import logging

AGENT_PATHS = ("/api/v1/agent/heartbeat/", "/api/v1/agent/report/")


class QuietAgentRequests(logging.Filter):
    """Agents heartbeat every second: their successful requests are DEBUG, not console lines
    that bury everything else (failures still show)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) >= 400:
            return True
        message = record.getMessage()
        if any(path in message for path in AGENT_PATHS):
            return logging.getLogger("quotaportal.agents").isEnabledFor(logging.DEBUG)
        return True
