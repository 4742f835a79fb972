"""How answers reach the agent's loop: heartbeats long-poll in a thread of their own, every
answer (a heartbeat's, a report's) lands in the loop's inbox, and each one merges into what
should run here without an older answer undoing a newer one (merged)."""

from __future__ import annotations

import contextlib
import os
import queue
import select
import threading

from quotaportal.hosts.agent.client import Client


class Inbox:
    """What the agent's threads hand its loop: heartbeat answers, and the work a report's
    answer brings. The loop sleeps in wait() until something arrives or one of its jobs exits
    (the job's pidfd turns readable), so neither waits for the loop's next look."""

    def __init__(self):
        self._items: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)

    def put(self, kind: str, item) -> None:
        self._items.put((kind, item))
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
            os.write(self._wake_write, b"!")

    def wait(self, timeout: float, exits: list[int] = ()) -> list[tuple[str, object]]:
        """Whatever arrived, after waiting up to `timeout` for something or an exit."""
        if self._items.empty():
            select.select([self._wake_read, *exits], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 4096):
                pass
        arrived = []
        with contextlib.suppress(queue.Empty):
            while True:
                arrived.append(self._items.get_nowait())
        return arrived


class HeartbeatPoller:
    """One heartbeat at a time, in its own thread, so a long-poll never delays the agent's
    look at its jobs. The agent asks; the answer (or the error) arrives in its inbox."""

    def __init__(self, client: Client, name: str, inbox: Inbox):
        self.client, self.name, self.inbox = client, name, inbox
        self.busy = False  # an ask is out; the agent clears it when the answer arrives
        self._asks: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)
        self._thread.start()

    def ask(self, running: list[int], wait: float, known: str, heard_up_to: int) -> None:
        self.busy = True
        self._asks.put((running, wait, known, heard_up_to))

    def close(self) -> None:
        self._asks.put(None)

    def _run(self) -> None:
        while (ask := self._asks.get()) is not None:
            running, wait, known, heard_up_to = ask
            try:
                answer = self.client.heartbeat(self.name, running, wait, known, heard_up_to)
            except Exception as err:  # handed to the agent's thread, which decides
                answer = err
            self.inbox.put(HEARTBEAT, answer)


HEARTBEAT, WORK = "heartbeat", "work"


def merged(desired: list[dict], listed: list[dict], horizon: int, heard_up_to: int) -> list[dict]:
    """What should run here once one more answer (`listed`, covering placements up to
    `horizon`) is taken in; `heard_up_to` is the newest placement earlier answers covered.

    Heartbeats and report answers travel separately, so an answer read earlier may arrive
    later. A placement only goes forward: held back (`hold`: an earlier attempt of its job
    still runs elsewhere), free to start, ended; and every answer that covers a placement
    not ended lists it. So a placement is dropped when an answer covering it leaves it out
    (it has ended for good); one is added only when no answer covered it yet (else one left
    it out); a held one is freed by the first answer that lists it free, and never held
    again. An older answer can thus neither stop what a newer one started, nor revive what
    a newer one ended, nor hold back what a newer one freed.
    """
    answer = {spec["placement"]: spec for spec in listed}
    kept = []
    for spec in desired:
        placement = spec["placement"]
        if placement in answer:
            kept.append(answer[placement] if spec.get("hold") else spec)
        elif placement > horizon:
            kept.append(spec)
    known = {spec["placement"] for spec in kept}
    new = [spec for spec in listed if spec["placement"] > heard_up_to]
    return kept + [spec for spec in new if spec["placement"] not in known]
