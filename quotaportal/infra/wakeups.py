"""Wake-ups: telling whoever waits on a service environment that it changed.

A heartbeat may wait (long-poll) until what should run on its host changes. Whatever changes
that is announced by the tick once its transaction commits (tick.changes),
through publish() here. Waiters block on an in-process condition; with REDIS_URL set,
announcements travel between processes (web workers, Celery worker) over Redis pub/sub,
relayed into each process's condition by one listener thread.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import defaultdict

from django.conf import settings

from quotaportal.infra import redis_client

log = logging.getLogger(__name__)


def channel() -> str:
    return redis_client.key("environment-changed")


_condition = threading.Condition()
_generation: dict[int, int] = defaultdict(int)  # environment id -> announcements seen here
_listener: threading.Thread | None = None
_listener_lock = threading.Lock()


def publish(env_id: int) -> None:
    """Wake every waiter on `env_id`, here and (with Redis) in every other process, now."""
    _wake(env_id)
    if not settings.REDIS_URL:
        return
    try:
        redis_client.client(settings.REDIS_URL).publish(channel(), f"{env_id} {_origin()}")
    except Exception:  # waiters still wake at their timeout; the work is not lost
        log.warning("could not announce environment %s over Redis", env_id, exc_info=True)


def _origin() -> str:
    """This process, as its announcements name it: its own come back through the listener,
    and waking its waiters twice (the second time late, whenever Redis relays it) would tell
    a waiter that took its mark in between of a change it had already seen."""
    return f"{socket.gethostname()}/{os.getpid()}"


def _relayed(data: bytes | str) -> int | None:
    """The environment an announcement from Redis names, or None for this process's own."""
    text = data.decode() if isinstance(data, bytes) else data
    env_id, _, origin = text.partition(" ")
    return None if origin == _origin() else int(env_id)


def _wake(env_id: int) -> None:
    with _condition:
        _generation[env_id] += 1
        _condition.notify_all()


def generation(env_id: int) -> int:
    """A mark to wait from: take it before reading the state, then wait_for(..., since=it)."""
    _ensure_listener()
    with _condition:
        return _generation[env_id]


def wait_for(env_id: int, since: int, timeout: float, given_up=lambda: False) -> bool:
    """Block until `env_id` is announced after mark `since`, or `timeout` seconds pass, or
    `given_up()` turns true (checked whenever the waiters are nudged)."""
    deadline = time.monotonic() + timeout
    with _condition:
        while _generation[env_id] == since:
            left = deadline - time.monotonic()
            if left <= 0 or given_up():
                return False
            _condition.wait(left)
    return True


def nudge() -> None:
    """Wake every waiter of this process to look at its `given_up` again."""
    with _condition:
        _condition.notify_all()


def _ensure_listener() -> None:
    """One thread per process relays Redis announcements into the local condition."""
    global _listener
    if not settings.REDIS_URL or (_listener is not None and _listener.is_alive()):
        return
    with _listener_lock:
        if _listener is None or not _listener.is_alive():
            ready = threading.Event()
            _listener = threading.Thread(
                target=_listen, args=(ready,), name="quotaportal-wakeups", daemon=True
            )
            _listener.start()
            ready.wait(2.0)  # subscribed before the first wait, so no announcement slips by


def _listen(ready: threading.Event) -> None:
    while True:
        try:
            pubsub = redis_client.client(settings.REDIS_URL, timeout=None).pubsub(
                ignore_subscribe_messages=True
            )
            pubsub.subscribe(channel())
            ready.set()
            for message in pubsub.listen():
                if message.get("type") == "message" and (
                    (env_id := _relayed(message["data"])) is not None
                ):
                    _wake(env_id)
        except Exception:
            log.warning("wakeup listener lost Redis; retrying in 1 s", exc_info=True)
            # Every waiter re-checks: an announcement may have been missed meanwhile.
            with _condition:
                for env_id in list(_generation):
                    _generation[env_id] += 1
                _condition.notify_all()
            time.sleep(1.0)
