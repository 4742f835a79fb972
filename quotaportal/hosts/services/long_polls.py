"""Fair long-polls: heartbeats that wait never crowd out the requests people make.

A waiting heartbeat holds a web thread (gunicorn's gthread workers give each open request
one). So each process lets at most QP_LONG_POLL_SLOTS heartbeats wait at once (a quarter of
its threads by default); past that, a heartbeat is answered at once, with `poll_after`
telling the agent when to ask again. And one agent identity (token and host) waits at most
once: a newer heartbeat from it ends the older one at once, so a flood from one token holds
one slot, not all of them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from django.conf import settings

from quotaportal.infra import wakeups

POLL_AFTER_SECONDS = 1.0  # when no slot was free: soon, but not in a tight loop


@dataclass(eq=False)
class Waiter:
    identity: tuple
    superseded: bool = field(default=False)


_lock = threading.Lock()
_waiting: dict[tuple, Waiter] = {}


def take_slot(identity: tuple) -> Waiter | None:
    """A slot to wait in, ending this identity's older wait; None when every slot is taken."""
    with _lock:
        older = _waiting.pop(identity, None)
        if older is not None:
            older.superseded = True
        elif len(_waiting) >= settings.QP_LONG_POLL_SLOTS:
            return None
        waiter = _waiting[identity] = Waiter(identity)
    if older is not None:
        wakeups.nudge()  # the older one returns now, with what it has
    return waiter


def release(waiter: Waiter) -> None:
    with _lock:
        if _waiting.get(waiter.identity) is waiter:
            del _waiting[waiter.identity]


def waiting_count() -> int:
    with _lock:
        return len(_waiting)
