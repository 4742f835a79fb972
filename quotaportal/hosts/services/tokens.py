"""Agent tokens: one identity per host, created and revoked by admins, stored hashed."""

from __future__ import annotations

import hashlib
import re
import secrets

from django.db import transaction
from django.utils import timezone

from quotaportal.hosts.models import AgentToken, GpuHost, HostState
from quotaportal.hosts.services.fleet import capacity_changed, lose_host
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import (
    Backend,
    ServiceEnvironment,
)
from quotaportal.quotas.permissions import require_admin

# Host names go into logs, commands and environment variables: keep them plain.
HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


HOST_NAME_RULE = (
    "host name must be 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_host_name(name: str) -> None:
    if not isinstance(name, str) or not HOST_NAME.fullmatch(name):
        raise InvalidInput({"name": HOST_NAME_RULE})


def create_agent_token(actor, env: ServiceEnvironment, host_name: str = "") -> str:
    """A new agent identity for one host of a LOCAL environment; shown once, stored hashed.

    With `host_name` the token serves only that host; without, it binds to the first host
    name it registers.
    """
    require_admin(actor, "create agent tokens")
    if env.backend != Backend.LOCAL:
        raise InvalidInput(
            {"service_environment": f"{env.name} is {env.backend}; agents join LOCAL environments"}
        )
    if host_name:
        check_host_name(host_name)
    # Hex, so the prefix shown in lists never starts with "-" (a command line would read
    # it as an option).
    token = secrets.token_hex(32)
    AgentToken.objects.create(
        environment=env, key_hash=_digest(token), prefix=token[:6], host_name=host_name
    )
    record(
        actor,
        "resource_changed",
        action="created",
        resource="agent token",
        name=f"{env.name}: {token[:6]}… for {host_name or 'the first host to register'}",
    )
    return token


def token_for(key: str) -> AgentToken | None:
    return (
        AgentToken.objects.select_related("environment")
        .filter(key_hash=_digest(key), revoked=False)
        .first()
    )


def agent_tokens(actor, env: ServiceEnvironment | None = None):
    require_admin(actor, "list agent tokens")
    tokens = AgentToken.objects.select_related("environment").prefetch_related("hosts")
    if env is not None:
        tokens = tokens.filter(environment=env)
    return tokens.order_by("-created_at", "-id")


@transaction.atomic
def revoke_agent_token(actor, token: AgentToken) -> AgentToken:
    """The token stops working at once; its hosts go LOST and their jobs fail over."""
    require_admin(actor, "revoke agent tokens")
    now = timezone.now()
    AgentToken.objects.filter(pk=token.pk).update(revoked=True, revoked_at=now)
    token.revoked, token.revoked_at = True, now
    hosts = list(GpuHost.objects.filter(agent_token=token).exclude(state=HostState.LOST))
    for host in hosts:
        lose_host(host, now, "agent token revoked", actor)
    record(
        actor,
        "resource_changed",
        action="revoked",
        resource="agent token",
        name=f"{token.environment.name}: {token.prefix}… ({token.host_name or 'unbound'})",
    )
    if hosts:
        capacity_changed(token.environment)
    return token
