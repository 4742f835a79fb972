"""One Redis client per process and server: the tick marks and the agents' wake-ups use it."""

from __future__ import annotations

from functools import cache

from django.conf import settings


@cache
def client(url: str, timeout: float | None = 2.0):
    """A client for `url`. Commands give up after `timeout` seconds; a pub/sub listener, which
    waits for messages indefinitely, asks for None."""
    import redis

    return redis.Redis.from_url(url, socket_timeout=timeout)


def key(name: str) -> str:
    """A key (or channel) of this deployment: QP_REDIS_PREFIX, then `name`. Two deployments,
    or two test runs, on one Redis database keep apart by their prefixes."""
    return f"{settings.QP_REDIS_PREFIX}:{name}"


def mark(name: str, seconds: float) -> None:
    """Set the flag `name` (a key()) for `seconds`, at least a millisecond."""
    client(settings.REDIS_URL).set(name, 1, px=max(1, round(seconds * 1000)))


def marked(name: str) -> bool:
    """Is the flag `name` set (and not yet expired)?"""
    return bool(client(settings.REDIS_URL).exists(name))
