"""The production shape on this machine, for the soak test and the benchmarks: gunicorn,
one Celery worker, Celery beat and quotaportal-agent processes (simulated GPUs), each
process logging to a file in a work folder.

It never touches what it did not create: its PostgreSQL database is new and named for this
run (`quotaportal_soak_3f9a1c`), its Redis database one that was empty and that it claimed
(DATABASE_URL and REDIS_URL name the servers), and stop() drops and flushes only those. The
one exception is what an earlier run killed outright left, which a new run sweeps
(scripts/leftovers.py says how it knows)."""

from __future__ import annotations

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))  # scripts/ is not a package
import leftovers  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Stack:
    """The services of docker-compose.yml as local processes, with their logs in a folder."""

    def __init__(self, database: str, *, prefix: str, host_timeout: int = 8):
        self.run = secrets.token_hex(3)
        self.database = f"{database}_{self.run}"
        leftovers.remove_folders_whose_owner_is_gone(Path(tempfile.gettempdir()), prefix)
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.dir.chmod(0o711)
        leftovers.mark_folder(self.dir, self.run)
        server = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/quotaportal")
        redis_server = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
        self.redis_url = leftovers.claim_redis_database(redis_server, self.run)
        self.database_created = False
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": server.rsplit("/", 1)[0] + f"/{self.database}",
            "REDIS_URL": self.redis_url,
            "QP_DEBUG": "false",
            "QP_SECRET_KEY": secrets.token_urlsafe(32),
            "QP_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "QP_TICK_SECONDS": "1",
            "QP_HOST_TIMEOUT": str(host_timeout),
            "DJANGO_SETTINGS_MODULE": "quotaportal.settings",
        }
        self.processes: dict[str, subprocess.Popen] = {}
        self.agent_tokens: dict[str, str] = {}
        self.handlers_replaced = stop_on_termination()

    def bin(self, name: str) -> str:
        return str(Path(sys.executable).parent / name)

    def start(self, name: str, command: list[str], env: dict | None = None) -> None:
        log = open(self.dir / f"{name}.log", "a")  # noqa: SIM115 - lives as long as the process
        self.processes[name] = subprocess.Popen(
            command,
            cwd=REPO,
            env=env or self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=leftovers.ended_with(os.getpid()),
        )

    def manage(self, *command: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *command],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"manage.py {' '.join(command)} failed:\n{done.stderr}")
        return done.stdout

    def fresh_database(self) -> None:
        """Create this run's database and its tables."""
        self.create_database()
        self.manage("migrate", "--noinput")

    def create_database(self) -> None:
        """CREATE fails rather than reuse one that exists. First, the databases of runs that
        were killed outright go."""
        import psycopg

        with psycopg.connect(self._admin_url(), autocommit=True) as conn:
            leftovers.drop_databases_whose_owner_is_gone(conn)
            conn.execute(f"CREATE DATABASE {self.database}")
            leftovers.mark_database(conn, self.database, self.run)
        self.database_created = True

    def _admin_url(self) -> str:
        return self.env["DATABASE_URL"].rsplit("/", 1)[0] + "/postgres"

    def discard_data(self) -> None:
        """Drop this run's database and empty its claimed Redis database: nothing else."""
        import psycopg

        if self.database_created:
            with psycopg.connect(self._admin_url(), autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")
            self.database_created = False
        leftovers.release_redis_database(self.redis_url, self.run)

    def _keep_database(self) -> None:
        import psycopg

        if self.database_created:
            with psycopg.connect(self._admin_url(), autocommit=True) as conn:
                leftovers.mark_database(conn, self.database, None)

    def user_token(self, user: str, *flags: str) -> str:
        return self.manage("create_user", user, *flags).strip().splitlines()[-1]

    def start_services(self, worker_concurrency: int = 2) -> None:
        """gunicorn (2 threaded workers, gunicorn.conf.py), the Celery workers and beat."""
        self.start(
            "web",
            [
                self.bin("gunicorn"),
                "quotaportal.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "2",
                "--timeout",
                "60",
            ],
        )
        # As deployed (docs/operators/deployment.md): the ticks' worker, and the long tasks'
        # worker at a lower CPU priority.
        self.start(
            "worker", self._worker("ticks", "-X", "background", "--concurrency", worker_concurrency)
        )
        self.start(
            "worker-background",
            [
                "nice",
                "-n",
                "10",
                *self._worker("background", "-Q", "background", "--concurrency", 2),
            ],
        )
        self.start(
            "beat",
            [
                self.bin("celery"),
                "-A",
                "quotaportal",
                "beat",
                "--loglevel",
                "WARNING",
                "--schedule",
                str(self.dir / "beat-schedule"),
            ],
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.url + "/healthz", timeout=2)
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        raise SystemExit(f"the web server did not come up; see {self.dir / 'web.log'}")

    def _worker(self, name: str, *options) -> list[str]:
        return [
            self.bin("celery"),
            "-A",
            "quotaportal",
            "worker",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            f"{name}@%h",
            *map(str, options),
            "--loglevel",
            "WARNING",
        ]

    def wait_for_scheduler(self, admin_token: str, queue: str, timeout: float = 60) -> None:
        """Wait until a tick of `queue` has run and both workers have said they are alive: the
        beat and the workers are up. A benchmark that began sooner would time the first
        seconds against their start-up (they take most of both cores for 2-3 s) instead of
        against the running service."""
        rest = Rest(self.url, admin_token)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, snapshot = rest.call("GET", f"job-queues/{queue}/snapshot/")
            if status == 200 and snapshot.get("last_tick_at"):
                break
            time.sleep(0.2)
        else:
            raise SystemExit(f"no tick of {queue} within {timeout:.0f} s; see {self.dir}/*.log")
        self._wait_for_workers(deadline)

    def _wait_for_workers(self, deadline: float) -> None:
        """Once started, each worker says so for every task queue it takes, in a key
        (quotaportal.infra.worker_health): wait for the ticks' queue and the long tasks'."""
        import redis

        store = redis.Redis.from_url(self.redis_url)
        prefix = self.env.get("QP_REDIS_PREFIX", "quotaportal")
        keys = [f"{prefix}:celery-worker-alive:{queue}" for queue in ("celery", "background")]
        while store.exists(*keys) < len(keys):
            if time.monotonic() > deadline:
                raise SystemExit(f"a Celery worker did not start; see {self.dir}/worker*.log")
            time.sleep(0.05)

    def start_agent(self, name: str, gpus: int, unit: str, *extra: str) -> None:
        # Agents get the server's URL and their own token, nothing of the server's settings.
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "QP_AGENT_TOKEN": self.agent_tokens[name],
        }
        self.start(
            name,
            [
                sys.executable,
                "-m",
                "quotaportal.hosts.agent",
                "--server",
                self.url,
                "--name",
                name,
                "--simulate",
                str(gpus),
                "--capacity-unit",
                unit,
                "--work-dir",
                str(self.dir / name),
                "--interval",
                "0.5",
                "--allow-root-jobs",  # benchmarks and the soak run as whoever starts them
                *extra,
            ],
            env=env,
        )

    def stop(self, keep_data: bool = False, keep_logs: bool | None = None) -> None:
        """Stop every process, then drop this run's data unless asked to keep it: its
        PostgreSQL database, and its work folder with the logs (`keep_logs`, by default as
        the data). The Redis database is emptied either way."""
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        if not (keep_data if keep_logs is None else keep_logs):
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            leftovers.mark_folder(self.dir, None)  # kept: no later run may sweep it
        if not keep_data:
            self.discard_data()
        else:
            self._keep_database()
            # A kept run is read from its PostgreSQL database and its logs; its Redis database
            # (queued tasks, tick marks) is emptied anyway, or kept runs would use up all 15.
            leftovers.release_redis_database(self.redis_url, self.run)
        for number in self.handlers_replaced:
            signal.signal(number, signal.SIG_DFL)
        self.handlers_replaced = []


def stop_on_termination() -> list[signal.Signals]:
    """SIGTERM and SIGHUP (`timeout`, a closed terminal) end the run as Ctrl-C does, through
    the caller's `finally: stack.stop()`: by default they would end it at once, leaving its
    services running in their own sessions and its databases claimed. A handler the caller
    set is left alone, as is every handler outside the main thread (none can be set there).
    The signals whose handler this replaced (stop() gives them back their default)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    replaced = []
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) is signal.SIG_DFL:
            signal.signal(number, _exit_on_signal)
            replaced.append(number)
    return replaced


def _exit_on_signal(number, _frame) -> None:
    raise SystemExit(128 + number)


class Rest:
    """A keep-alive HTTP connection to the REST API, one per client thread."""

    def __init__(self, url: str, token: str):
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body)
        self.connection.request(method, f"/api/v1/{path}", body=data, headers=self.headers)
        response = self.connection.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if raw else {})


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def finish(figures: dict, ok: bool, slurm_line: str | None, failure: str, as_json: bool) -> int:
    """The closing lines every benchmark prints: Slurm's figure (or how to get one), a failure
    if the run did not do what it timed, and with --json one JSON object last."""
    print(slurm_line or "Slurm: not set up (../shared/bench/slurm_anchor.sh setup), no figure")
    if not ok:
        print(f"FAILED: {failure}")
    if as_json:
        print(json.dumps(figures))
    return 0 if ok else 1
