"""manage.py demo — the whole product on the embedded default, in one command.

Migrates the database (SQLite unless DATABASE_URL says otherwise), seeds AWS's walkthrough on
a LOCAL environment with example jobs, starts the web server, an in-process scheduler loop
and one simulated GPU host (quotaportal-agent --simulate), and prints the URL and logins.
Ctrl-C stops everything.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from io import StringIO
from ipaddress import ip_network
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import GpuHost
from quotaportal.notifications import tasks as notifications
from quotaportal.quotas.management.commands.seed_demo import UNIT
from quotaportal.quotas.models import Job, ServiceEnvironment
from quotaportal.tick.loop import SchedulerLoop
from quotaportal.usage.tasks import RollupThread

DEMO_HOST = "demo-host-1"


def wait_for_port(host: str, port: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.2)
    return False


class Command(BaseCommand):
    help = "Run the demo: web server, scheduler loop and a simulated GPU host (Ctrl-C stops)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--port",
            type=int,
            default=8000,
            help="port of the web server on 127.0.0.1 (default 8000; make demo PORT=8101)",
        )
        parser.add_argument("--password", help="password for every demo user (default: random)")
        parser.add_argument("--gpus", type=int, default=3, help="GPUs of the simulated host")

    def handle(self, *args, port, password, gpus, **options):
        call_command("migrate", verbosity=0)
        seeded = StringIO()
        fresh = not Job.objects.exists()
        seed_args = ["--backend", "LOCAL", "--capacity", str(gpus)] + (["--jobs"] if fresh else [])
        call_command(
            "seed_demo", *seed_args, *(["--password", password] if password else []), stdout=seeded
        )
        token = self.agent_token(ServiceEnvironment.objects.get(name="demo"))
        url = f"http://127.0.0.1:{port}"
        if "QP_PUBLIC_URL" not in os.environ:  # the links in e-mails and Slack point here
            settings.QP_PUBLIC_URL = url
        if not settings.QP_METRICS_TOKEN and not settings.QP_METRICS_ALLOWED_IPS:
            # The demo serves this machine alone: its /metrics answers this machine's scrapes.
            settings.QP_METRICS_ALLOWED_IPS = [ip_network("127.0.0.1/32"), ip_network("::1/128")]
        # The submit form offers a job worth watching: it runs two minutes, printing progress,
        # and checkpoints when preempted (RUNNABLE -> RUNNING -> preempted -> resumed).
        settings.QP_EXAMPLE_COMMAND = (
            settings.QP_EXAMPLE_COMMAND
            or f"{shlex.quote(sys.executable)} -m quotaportal.hosts.demo_job --seconds 120"
        )
        self.banner(url, seeded.getvalue())
        loop = SchedulerLoop(period=settings.QP_TICK_SECONDS)
        loop.start()
        notifications.start_in_process()  # webhooks and e-mail, after each commit
        usage = RollupThread()  # the hourly usage rows the usage page reads
        usage.start()
        agent: dict[str, subprocess.Popen] = {}
        starter = threading.Thread(
            target=self.start_agent, args=(url, port, token, gpus, agent), daemon=True
        )
        starter.start()
        # Ctrl-C, or a plain `kill`, stops everything: even where SIGINT was ignored at start
        # (background jobs of a non-interactive shell), both end the web server cleanly.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            call_command("runserver", f"127.0.0.1:{port}", use_reloader=False)
        finally:
            self.stdout.write("stopping: scheduler loop and simulated host ...")
            loop.stop()
            usage.stop()
            if "process" in agent:
                agent["process"].terminate()
                agent["process"].wait(timeout=60)

    def agent_token(self, env: ServiceEnvironment) -> str:
        """A token for the demo's host. An earlier run's host still belongs to that run's token,
        which ended with it (tokens are stored hashed, so it cannot be handed on): release the
        host first, as an admin would, so this run's agent may register it. Attempts the last
        run left open end as on any lost host ("Host lost"), retried while attempts remain."""
        host = GpuHost.objects.filter(service_environment=env, name=DEMO_HOST).first()
        if host is not None and host.agent_token_id is not None:
            host_services.release_host(None, host)
        return host_services.create_agent_token(None, env, DEMO_HOST)

    def start_agent(self, url: str, port: int, token: str, gpus: int, holder: dict) -> None:
        if not wait_for_port("127.0.0.1", port):
            self.stderr.write("the web server did not start; no agent launched")
            return
        # One folder per port: a restarted agent kills what its folder says it left running,
        # so two demos on two ports must not share one.
        work_dir = Path(settings.BASE_DIR) / "var" / f"agent-{port}"
        holder["process"] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quotaportal.hosts.agent",
                "--server",
                url,
                "--name",
                DEMO_HOST,
                "--simulate",
                str(gpus),
                "--capacity-unit",
                UNIT,
                "--work-dir",
                str(work_dir),
                "--interval",
                "1",
                # The demo's one host runs demo jobs for whoever started it, on their machine.
                "--allow-root-jobs",
            ],
            # The token travels in the environment, never on a command line others can read.
            env={**os.environ, "QP_AGENT_TOKEN": token},
        )

    def banner(self, url: str, seeded: str) -> None:
        logins = [line for line in seeded.splitlines() if line.startswith("user ")]
        # "user alice  password …  token …  team …": the docs' samples submit as alice.
        tokens = {line.split()[1]: line.split("token ")[1].split()[0] for line in logins}
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "quotaportal demo",
                    f"  open {url}  (API docs: {url}/api/docs/)",
                    "  sign in as:",
                    *(f"    {line[5:]}" for line in logins),
                    "  the docs' samples run as alice against this server after:",
                    f"    export QP_URL={url} TOKEN={tokens.get('alice', '')}",
                    f"  Prometheus metrics: {url}/metrics (from this machine; elsewhere set "
                    "QP_METRICS_TOKEN or QP_METRICS_ALLOWED_IPS)",
                    "  one simulated GPU host runs the jobs; Ctrl-C stops everything",
                    "",
                ]
            )
        )
