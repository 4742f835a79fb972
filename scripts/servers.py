"""A PostgreSQL and a Redis server of a run's own, on free ports in a folder of their own, for
chaos that stops and restarts them: the soak's outages must never touch the servers
DATABASE_URL and REDIS_URL name, which others use.

PostgreSQL comes from the machine's binaries (`pg_config --bindir`, else
/usr/lib/postgresql/*/bin); run as root, the server runs as the `postgres` user, as
PostgreSQL insists. Redis keeps nothing on disk, as the broker of a fresh deployment would
after a restart without persistence: queued tasks are lost and the periodic ticks cover them.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from stack import free_port


def _postgres_bin(name: str) -> str:
    try:
        bindir = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if Path(bindir, name).exists():
            return str(Path(bindir, name))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise SystemExit(f"{name} not found: install PostgreSQL's server package to use --outages")
    return found[-1]


class OwnPostgres:
    """initdb'd on start-up; stop() and start() keep the data, close() removes it."""

    def __init__(self, root: Path):
        self.root, self.data, self.port = root, root / "postgres", free_port()
        self.log = root / "postgres.log"
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.data.mkdir()
        if self.as_postgres:
            shutil.chown(self.data, "postgres", "postgres")
            shutil.chown(root, "postgres")
        self._run(_postgres_bin("initdb"), "-D", str(self.data), "-U", "postgres",
                  "--auth=trust", "-E", "UTF8", "--no-sync")  # fmt: skip
        self.start()

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/quotaportal"

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c max_connections=200")  # fmt: skip
        self._run(_postgres_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                  "-o", options, "-w", "start")  # fmt: skip

    def stop(self) -> None:
        """A fast shutdown: open connections are cut, as in a restart or a failover."""
        self._run(_postgres_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()

    def _run(self, *command: str) -> None:
        done = subprocess.run([*self.as_postgres, *command], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{Path(command[0]).name} failed:\n{done.stdout}{done.stderr}")


class OwnRedis:
    def __init__(self, root: Path):
        self.root, self.port = root, free_port()
        self.process: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server not found: install Redis to use --outages")
        log = open(self.root / "redis.log", "a")  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.root),
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        import redis

        while time.monotonic() < deadline:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise SystemExit(f"redis-server did not start; see {self.root / 'redis.log'}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # an outage, not a tidy shutdown
            self.process.wait()
        self.process = None

    def close(self) -> None:
        self.stop()


class OwnServers:
    """Both servers; `environment()` is what to put in DATABASE_URL and REDIS_URL."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="qp-servers-"))
        self.root.chmod(0o755)
        self.postgres = OwnPostgres(self.root)
        self.redis = OwnRedis(self.root)

    def environment(self) -> dict[str, str]:
        return {"DATABASE_URL": self.postgres.url, "REDIS_URL": self.redis.url}

    def close(self, keep: bool = False) -> None:
        self.redis.close()
        self.postgres.close()
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)
