"""The agent's reports (a rank started, its output, its exit) leave from a thread of their own,
in order, as many per request as have piled up: the agent's loop never waits on the network,
and a host running many short jobs sends one request where it had a dozen.

An exit goes at once: it frees GPUs, and its answer brings their next jobs. A start or some
output waits up to LINGER for an exit to ride with: its time is its age, not its arrival, so
waiting costs it nothing, while a request of its own would cost the server a transaction and
could hold up the exit that follows it (a request at a time is in flight)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from quotaportal.hosts.agent.client import AgentError, AuthError, Client, Unreachable

log = logging.getLogger("quotaportal-agent")
MAX_BATCH = 256  # the server's limit per request
MAX_RETRY_DELAY = 5.0
MAX_AGE = 7 * 86_400.0  # the server refuses older ages; an older event is dated this old
LINGER = 0.25  # seconds a start or output report waits for an exit to go with


def aged(batch: list[tuple[float, dict]]) -> list[dict]:
    """The reports as sent: each with its `age`, the seconds since its event on this host's
    monotonic clock. The server dates the event by it (its arrival less the age), so time a
    report waits here behind others never counts as the job's."""
    now = time.monotonic()
    return [{**report, "age": round(min(now - seen, MAX_AGE), 3)} for seen, report in batch]


class Reporter:
    def __init__(self, client: Client, name: str, on_work: Callable[[dict], None] | None = None):
        self.client, self.name = client, name
        self.on_work = on_work  # called with an answer that says what should run here now
        self.auth_error: AuthError | None = None  # the agent's loop raises it
        self._pending: deque[tuple[float, dict]] = deque()  # (when seen, report)
        self._exits = 0  # exit reports in _pending: the batch goes at once
        self._hurry = False  # drain: send what is pending without lingering
        self._changed = threading.Condition()
        self._closing = False
        self._batches = True  # False once a server without the batch endpoint answered
        self._thread = threading.Thread(target=self._run, name="reports", daemon=True)
        self._thread.start()

    def put(self, report: dict) -> None:
        """Queue a report of an event that happened just now."""
        with self._changed:
            self._pending.append((time.monotonic(), report))
            self._exits += report["event"] == "exited"
            self._changed.notify_all()

    def unanswered(self) -> set[int]:
        """The placements with reports not yet answered by the server (queued or on their
        way): a heartbeat must not have the server close one before its exit is dated."""
        with self._changed:
            return {report["placement"] for _, report in self._pending}

    def drain(self, timeout: float) -> bool:
        """Wait until every report has been sent (or dropped); False if time ran out."""
        with self._changed:
            self._hurry = True
            self._changed.notify_all()
            try:
                return self._changed.wait_for(lambda: not self._pending, timeout)
            finally:
                self._hurry = False

    def close(self) -> None:
        with self._changed:
            self._closing = True
            self._changed.notify_all()

    def _run(self) -> None:
        delay = 0.25
        while True:
            with self._changed:
                while (wait := self._wait_before_sending()) != 0:
                    if wait is None and self._closing:
                        return
                    self._changed.wait(wait)
                batch = [self._pending[i] for i in range(min(len(self._pending), MAX_BATCH))]
            try:
                self._send(aged(batch))
            except Unreachable:
                # Kept, in order, until the server is back; the lease guards the jobs.
                with self._changed:
                    self._changed.wait(delay)
                delay = min(delay * 2, MAX_RETRY_DELAY)
                continue
            except AuthError as err:
                self.auth_error = err
                batch = list(self._pending)  # nothing more can be said with this token
            except AgentError as err:
                log.warning("%d report(s) dropped: %s", len(batch), err)
            delay = 0.25
            with self._changed:
                for _ in batch:
                    _, report = self._pending.popleft()
                    self._exits -= report["event"] == "exited"
                self._changed.notify_all()

    def _wait_before_sending(self) -> float | None:
        """0: send now; else how long the pending reports may linger (None: none pending)."""
        if not self._pending:
            return None
        if self._exits or self._closing or self._hurry:
            return 0
        oldest = self._pending[0][0]
        return max(0.0, oldest + LINGER - time.monotonic())

    def _send(self, batch: list[dict]) -> None:
        if self._batches:
            try:
                answer = self.client.reports(self.name, batch)
            except AgentError as err:
                if "not found" not in str(err).lower() or isinstance(err, AuthError):
                    raise
                self._batches = False  # an older server: one report per request
            else:
                if "placements" in answer and self.on_work is not None:
                    self.on_work(answer)  # the exits freed GPUs: their next jobs, at once
                for report, result in zip(batch, answer["results"], strict=False):
                    if not result.get("ok"):
                        log.warning(
                            "report for placement %s dropped: %s",
                            report["placement"],
                            result.get("detail"),
                        )
                return
        for report in batch:
            try:
                self.client.report(self.name, **report)
            except (AuthError, Unreachable):
                raise
            except AgentError as err:  # e.g. the job's placement is gone
                log.warning("report for placement %s dropped: %s", report["placement"], err)
