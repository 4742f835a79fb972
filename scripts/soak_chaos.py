"""The soak's chaos: agents killed and started again (Chaos), the broker and the database
taken down in turn on servers of the soak's own (Outages)."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

from servers import OwnServers


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


class Chaos:
    """kill -9 (or SIGTERM) a random agent every few seconds, then start it again."""

    def __init__(self, stack, every: float, seed: int):
        self.stack, self.every = stack, every
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.kills = Counter()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            name = self.rng.choice(sorted(self.stack.agent_tokens))
            process = self.stack.processes[name]
            how = signal.SIGKILL if self.rng.random() < 0.7 else signal.SIGTERM
            process.send_signal(how)
            self.kills[how.name] += 1
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
            # Down for a while: sometimes past the host timeout, so its host goes LOST.
            self.stop.wait(self.rng.choice([1, 3, 10]))
            self.stack.start_agent(name)


class Outages:
    """Take the broker and the database down in turn, each for a while, then bring it back."""

    SETTLE = 10.0  # after a server is back, a 503 may still be on its way

    def __init__(self, servers: OwnServers, every: float, seconds: float):
        self.servers, self.every, self.seconds = servers, every, seconds
        self.stop = threading.Event()
        self.done: Counter = Counter()
        self.last_end = -1e9
        self.down = False

    def recent(self) -> bool:
        return self.down or time.monotonic() - self.last_end < self.SETTLE

    def run(self) -> None:
        kinds = [("broker", self.servers.redis), ("database", self.servers.postgres)]
        turn = 0
        while not self.stop.wait(self.every):
            kind, server = kinds[turn % 2]
            turn += 1
            say(f"outage: {kind} down for {self.seconds:.0f} s")
            self.down = True
            server.stop()
            self.stop.wait(self.seconds)
            server.start()
            self.last_end, self.down = time.monotonic(), False
            self.done[kind] += 1
            say(f"outage: {kind} back")


def healthz(url: str) -> int:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return 0
