"""Soak the production-mode stack while agents are killed, then prove nothing went wrong.

    .venv/bin/python scripts/soak.py [--agents 3] [--gpus 2] [--threads 4] [--minutes 3]

Starts, on this machine, what docker-compose.yml runs: gunicorn (2 workers), the two Celery
workers (ticks, long tasks), Celery beat, and N quotaportal-agent processes (simulated GPUs, one
token each), on a new PostgreSQL database named for the run (`quotaportal_soak_<run>`) and an
empty Redis database it claims (DATABASE_URL and REDIS_URL name the servers), dropped and
emptied at the end (--keep keeps the database); nothing else on those servers is touched. Two
job queues share one LOCAL environment. M threads submit, raise and lower priorities and
terminate jobs through the REST API for T minutes, while a chaos thread kills an agent with
kill -9 (or SIGTERM) every few seconds and starts it again. With --outages, the run brings its own
PostgreSQL and Redis servers (scripts/servers.py, on free ports) and an outage thread takes them
down in turn: the broker killed for a while, the database stopped (connections cut) and started
again.

Every job runs a small program that takes an exclusive lock on its job id and on each GPU it
was given (flock, released when its process dies), so a job running twice at once, or two
jobs on one GPU, is caught where it happens. At the end it waits for the queues to drain and
checks from the database and those locks that:
- nothing was lost: every job the API accepted exists, and every job reached a final state;
- nothing ran twice: no job held its lock while another copy tried to take it;
- capacity was never exceeded: no GPU was taken twice, and dispatched attempts never held
  more instances than the environment has;
- no request got a 5xx answer, except a 503 while a server was down (or just after);
- with --outages: the Celery worker outlived them and /healthz answers 200 at the end.
It prints the counts and exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import stack  # noqa: E402 - scripts/ is not a package
from servers import OwnServers  # noqa: E402
from soak_chaos import Chaos, Outages, say  # noqa: E402
from soak_checks import check  # noqa: E402

DATABASE = "quotaportal_soak"
UNIT = "gpu1"

JOB_PROGRAM = r"""
import fcntl, os, signal, sys, time
ledger, seconds = sys.argv[1], float(sys.argv[2])
job, attempt, rank = os.environ["QP_JOB_ID"], os.environ["QP_ATTEMPT"], os.environ["QP_RANK"]
host = os.environ["QP_HOST_NAME"]
held = []
def take(name):
    handle = open(os.path.join(ledger, name), "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        with open(os.path.join(ledger, "violations"), "a") as out:
            out.write(f"{name} was held by another process when job {job} attempt {attempt} "
                      f"rank {rank} started on {host}\n")
        sys.exit(3)
    held.append(handle)
take(f"job-{job}-rank-{rank}.lock")  # a wide job's ranks run at once, each only once
for gpu in filter(None, os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")):
    take(f"gpu-{host}-{gpu}.lock")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
with open(os.path.join(ledger, "starts"), "a") as out:
    out.write(f"{job} {attempt} {rank} {host} {time.time():.3f}\n")
time.sleep(seconds)
"""


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=3, help="GPU hosts (default 3)")
    parser.add_argument("--gpus", type=int, default=2, help="GPUs per host (default 2)")
    parser.add_argument("--threads", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--minutes", type=float, default=3.0, help="load duration (default 3)")
    parser.add_argument(
        "--kill-every", type=float, default=15.0, help="seconds between agent kills (default 15)"
    )
    parser.add_argument(
        "--drain-minutes", type=float, default=4.0, help="wait this long for queues to empty"
    )
    parser.add_argument(
        "--outages",
        action="store_true",
        help="run on servers of the soak's own and take the broker and the database down in turn",
    )
    parser.add_argument(
        "--outage-every", type=float, default=30.0, help="seconds between outages (default 30)"
    )
    parser.add_argument(
        "--outage-seconds", type=float, default=12.0, help="how long each lasts (default 12)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database and work dirs")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.agents < 1 or args.gpus < 1 or args.threads < 1 or args.minutes <= 0:
        parser.error("--agents, --gpus and --threads must be at least 1, --minutes above 0")
    return args


class Stack(stack.Stack):
    """The soak's stack: the ledger its jobs lock, two queues on one LOCAL environment."""

    def __init__(self, args):
        super().__init__(DATABASE, prefix="qp-soak-")
        self.args = args
        self.ledger = self.dir / "ledger"
        self.ledger.mkdir(mode=0o777)
        self.program = self.ledger / "job.py"
        self.program.write_text(JOB_PROGRAM)

    def seed(self) -> dict[str, str]:
        """Admin, two teams, one LOCAL environment shared by two queues; API tokens by user."""
        tokens = {
            "ada": self.user_token("ada", "--admin"),
            "alice": self.user_token("alice", "--team", "vision"),
            "bob": self.user_token("bob", "--team", "nlp"),
        }
        self.api = Api(self.url, tokens)
        return tokens

    def configure(self) -> None:
        capacity = self.args.agents * self.args.gpus
        admin = self.api.as_user("ada")
        admin("POST", "capacity-units/", {"name": UNIT})
        admin("POST", "scheduling-policies/", {"name": "fifo"})
        limits = [{"capacity_unit": UNIT, "max_capacity": capacity}]
        admin(
            "POST",
            "service-environments/",
            {"name": "fleet", "backend": "LOCAL", "capacity_limits": limits},
        )
        half = max(1, capacity // 2)
        for queue, priority in (("train", 10), ("batch", 1)):
            admin(
                "POST",
                "job-queues/",
                {
                    "name": queue,
                    "priority": priority,
                    "scheduling_policy": "fifo",
                    "service_environment": "fleet",
                    "ordering": "BEST_EFFORT",
                    "preemption_grace_seconds": 2,
                },
            )
            for share, team, strategy, preempt in (
                ("vision", "vision", "LEND_AND_BORROW", True),
                ("nlp", "nlp", "LEND", False),
            ):
                admin(
                    "POST",
                    "quota-shares/",
                    {
                        "job_queue": queue,
                        "name": share,
                        "team": team,
                        "capacity_limits": [{"capacity_unit": UNIT, "max_capacity": half}],
                        "sharing_strategy": strategy,
                        "in_share_preemption": preempt,
                    },
                )
        for index in range(1, self.args.agents + 1):
            name = f"soak-host-{index}"
            answer = admin("POST", "service-environments/fleet/agent-token/", {"host_name": name})
            self.agent_tokens[name] = answer["token"]

    def start_agent(self, name: str) -> None:
        super().start_agent(name, self.args.gpus, UNIT, "--output-every", "2")


class Api:
    """A tiny REST client that counts answers by status (409: the job had ended already; a 5xx
    must never happen)."""

    def __init__(self, url: str, tokens: dict[str, str]):
        self.url, self.tokens = url + "/api/v1/", tokens
        self.answers: Counter = Counter()
        self.server_errors: list[str] = []
        self.unavailable_in_outages = 0  # 503s while a server was down: the answer expected
        self.outages: Outages | None = None
        self.lock = threading.Lock()

    def as_user(self, user: str):
        def call(method: str, path: str, body: dict | None = None):
            return self.call(user, method, path, body)

        return call

    def call(self, user: str, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": f"Token {self.tokens[user]}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as err:
            status, payload = err.code, err.read()
        with self.lock:
            self.answers[status] += 1
            if status == 503 and self.outages is not None and self.outages.recent():
                self.unavailable_in_outages += 1
            elif status >= 500:
                self.server_errors.append(f"{method} {path}: {status} {payload[:200]!r}")
        if status >= 400:
            return None
        return json.loads(payload or b"{}")


class Load:
    """Scientists: submit (with a client token, retried on network errors), bump, terminate."""

    def __init__(self, stack: Stack, seed: int):
        self.stack, self.api = stack, stack.api
        self.accepted: set[str] = set()
        self.recent: list[str] = []  # bumps and terminations go to jobs likely still active
        self.tokens_used: dict[str, str] = {}
        self.actions: Counter = Counter()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.seed = seed
        self.backlog, self.backlog_checked = 0, 0.0
        self.max_backlog = 10 * stack.args.agents * stack.args.gpus

    def job_body(self, rng: random.Random, user: str) -> dict:
        share = "vision" if user == "alice" else "nlp"
        seconds = rng.choice([0.5, 1, 2, 4, 8])
        return {
            "job_queue": rng.choice(["train", "batch"]),
            "quota_share": share,
            "capacity_unit": UNIT,
            "name": f"soak-{rng.randrange(10**6)}",
            "quantity": rng.choice([1, 1, 1, 2]),
            "scheduling_priority": rng.randrange(0, 100),
            "command": f"{sys.executable} -I {self.stack.program} {self.stack.ledger} {seconds}",
            "retry_attempts": 5,
            "client_token": secrets.token_hex(16),
        }

    def worker(self, index: int) -> None:
        rng = random.Random(self.seed * 1000 + index)
        while not self.stop.is_set():
            user = rng.choice(["alice", "bob"])
            roll = rng.random()
            if (roll < 0.65 and not self.backlog_full()) or not self.accepted:
                self.submit(user, rng)
            elif roll < 0.85:
                job = self.pick(rng)
                self.actions["priority"] += 1
                self.api.call(
                    self.owner(job),
                    "PATCH",
                    f"jobs/{job}/",
                    {"scheduling_priority": rng.randrange(0, 9999)},
                )
            elif roll < 0.95:
                job = self.pick(rng)
                self.actions["terminate"] += 1
                self.api.call(self.owner(job), "POST", f"jobs/{job}/terminate/", {"reason": "soak"})
            else:
                self.actions["list"] += 1
                self.api.call(user, "GET", "jobs/?limit=50")
            time.sleep(rng.uniform(0.02, 0.15))

    def backlog_full(self) -> bool:
        """Keep about a minute of work waiting, so the queues can drain when the load stops."""
        now = time.monotonic()
        if now - self.backlog_checked > 2:
            self.backlog_checked = now
            answer = self.api.call("ada", "GET", "jobs/?status=RUNNABLE&limit=1")
            self.backlog = answer["count"] if answer else 0
        return self.backlog > self.max_backlog

    def submit(self, user: str, rng: random.Random) -> None:
        body = self.job_body(rng, user)
        for _ in range(3):  # a retry with the same client_token never submits twice
            answer = self.api.call(user, "POST", "jobs/", body)
            if answer is not None:
                with self.lock:
                    self.accepted.add(answer["id"])
                    self.recent = [*self.recent[-49:], answer["id"]]
                    self.tokens_used[answer["id"]] = user
                self.actions["submit"] += 1
                return

    def pick(self, rng: random.Random) -> str:
        with self.lock:
            return rng.choice(self.recent)

    def owner(self, job: str) -> str:
        return self.tokens_used[job]


CHAOS: Chaos | None = None
OUTAGES: Outages | None = None


def main(argv=None) -> int:
    args = parse(argv)
    servers = OwnServers() if args.outages else None
    if servers is not None:
        os.environ.update(servers.environment())
        say(f"own servers: {servers.environment()}")
    try:
        return soak(args, servers)
    finally:
        if servers is not None:
            servers.close(keep=args.keep)


def soak(args, servers: OwnServers | None) -> int:
    global CHAOS, OUTAGES
    stack = Stack(args)
    say(f"work dir {stack.dir}; database {stack.database}; redis {stack.redis_url}")
    stack.fresh_database()
    stack.seed()
    stack.start_services()
    stack.configure()
    for name in stack.agent_tokens:
        stack.start_agent(name)
    say(
        f"stack up at {stack.url}: gunicorn x2, celery worker, beat, "
        f"{args.agents} agents x {args.gpus} GPUs"
    )
    load = Load(stack, args.seed)
    CHAOS = Chaos(stack, args.kill_every, args.seed)
    started = time.monotonic()
    threads = [
        threading.Thread(target=load.worker, args=(i,), daemon=True) for i in range(args.threads)
    ]
    threads.append(threading.Thread(target=CHAOS.run, daemon=True))
    if servers is not None:
        OUTAGES = Outages(servers, args.outage_every, args.outage_seconds)
        stack.api.outages = OUTAGES
        threads.append(threading.Thread(target=OUTAGES.run, daemon=True))
    for thread in threads:
        thread.start()
    try:
        end = started + args.minutes * 60
        while time.monotonic() < end:
            time.sleep(min(15, max(0.1, end - time.monotonic())))
            say(
                f"load: {dict(load.actions)}; answers {dict(stack.api.answers)}; "
                f"kills {dict(CHAOS.kills)}"
                + (f"; outages {dict(OUTAGES.done)}" if OUTAGES else "")
            )
        load.stop.set()
        CHAOS.stop.set()
        if OUTAGES is not None:
            OUTAGES.stop.set()
        for thread in threads:
            thread.join(60)
        for name in stack.agent_tokens:  # every host back for the drain
            if stack.processes[name].poll() is not None:
                stack.start_agent(name)
        deadline = time.monotonic() + args.drain_minutes * 60
        figures = check(stack, load, started, deadline, CHAOS, OUTAGES)
    finally:
        stack.stop(keep_data=args.keep)
    print(json.dumps(figures, indent=2))
    failed = [name for name, ok in figures["checks"].items() if not ok]
    say("FAILED: " + ", ".join(failed) if failed else "all checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
