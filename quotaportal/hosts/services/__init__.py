"""Writes for LOCAL environments: agent tokens, host registration, heartbeats, reports,
placement of dispatched jobs on hosts, and host loss. Part of the one services layer; the
agent API, the tick and the commands call these."""

from __future__ import annotations

from quotaportal.hosts.services.agents import (
    MAX_HOST_GPUS,
    desired_placements,
    heartbeat,
    register_host,
)
from quotaportal.hosts.services.fleet import (
    HOST_LOST,
    delete_host,
    finish_quiet_preemptions,
    mark_lost_hosts,
    place_started_jobs,
    release_host,
    set_host_state,
)
from quotaportal.hosts.services.reports import report, report_many, ship_output
from quotaportal.hosts.services.tokens import (
    agent_tokens,
    check_host_name,
    create_agent_token,
    revoke_agent_token,
    token_for,
)

__all__ = [
    "MAX_HOST_GPUS",
    "HOST_LOST",
    "agent_tokens",
    "check_host_name",
    "create_agent_token",
    "delete_host",
    "desired_placements",
    "heartbeat",
    "finish_quiet_preemptions",
    "mark_lost_hosts",
    "place_started_jobs",
    "register_host",
    "release_host",
    "report",
    "report_many",
    "ship_output",
    "revoke_agent_token",
    "set_host_state",
    "token_for",
]
