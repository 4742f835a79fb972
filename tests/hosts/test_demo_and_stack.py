"""The one-command demo, the compose stack's commands, and the agent's command line."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from quotaportal.hosts.agent.__main__ import main as agent_main
from quotaportal.hosts.agent.__main__ import parse as parse_agent_args
from quotaportal.hosts.agent.agent import Agent
from quotaportal.hosts.agent.client import Client


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def get_json(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def start_demo(repo: Path, tmp_path: Path, port: int) -> tuple[subprocess.Popen, list[str]]:
    """`make demo` on a database in `tmp_path`, and the lines it prints as they come."""
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "REDIS_URL": "",
        "QP_TICK_SECONDS": "1",
    }
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port)],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    threading.Thread(target=lines.extend, args=(demo.stdout,), daemon=True).start()
    return demo, lines


def test_the_demo_serves_runs_a_job_to_success_and_stops_cleanly(repo, tmp_path):
    port = free_port()
    demo, lines = start_demo(repo, tmp_path, port)
    try:
        token = None
        deadline = time.monotonic() + 90
        while token is None and time.monotonic() < deadline:
            token = admin_token(lines)
            time.sleep(0.3)
        assert token, "the demo printed no admin login:\n" + "".join(lines)
        base = f"http://127.0.0.1:{port}"
        succeeded = []
        while not succeeded and time.monotonic() < deadline:
            try:
                assert urllib.request.urlopen(f"{base}/login/", timeout=5).status == 200
                succeeded = get_json(f"{base}/api/v1/jobs/?status=SUCCEEDED", token)["results"]
            except OSError:
                pass
            time.sleep(1)
        assert succeeded, "no demo job reached SUCCEEDED:\n" + "".join(lines[-40:])
        assert succeeded[0]["attempts"][0]["placements"][0]["output_tail"].rstrip().endswith("done")
        assert any("team research, submits to QS1" in line for line in lines)
        assert exported(lines).startswith(f"export QP_URL={base} TOKEN=")
        readme_curl_submits_a_job(repo, exported(lines))
        # /metrics answers this machine, as the printout says.
        assert any(f"Prometheus metrics: {base}/metrics" in line for line in lines)
        scraped = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
        assert "quotaportal_environment_capacity" in scraped
        running = get_json(f"{base}/api/v1/jobs/?status=RUNNING", token)["count"]
    finally:
        stop_demo(demo, repo, port)
    assert running >= 1, "jobs were running when Ctrl-C came"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0, "the web server stopped"
    assert not any("/api/v1/agent/heartbeat/" in line for line in lines), "heartbeats are DEBUG"


def test_the_demo_started_again_runs_jobs_again(repo, tmp_path):
    """A second `make demo` on the same database: its new agent token takes over the host
    the first run's token held, and a job submitted then runs."""
    for run in ("first", "second"):
        port = free_port()
        demo, lines = start_demo(repo, tmp_path, port)
        try:
            deadline = time.monotonic() + 90
            while not any("registered demo-host-1" in line for line in lines):
                assert time.monotonic() < deadline, "no agent registered:\n" + "".join(lines)
                time.sleep(0.3)
            job = readme_curl_submits_a_job(repo, exported(lines))
            status = job["status"]
            while status not in ("RUNNING", "SUCCEEDED", "FAILED"):
                assert time.monotonic() < deadline, f"the {run} run's job stays {status}"
                time.sleep(0.5)
                url = f"http://127.0.0.1:{port}/api/v1/jobs/{job['id']}/"
                status = get_json(url, admin_token(lines))["status"]
            assert status == "RUNNING", f"the {run} run's job is {status}"
            assert not any("refused the token" in line for line in lines), "".join(lines[-30:])
        finally:
            stop_demo(demo, repo, port)


def stop_demo(demo: subprocess.Popen, repo: Path, port: int) -> None:
    """Ctrl-C in the terminal, which reaches the whole group; then its agent's folder goes.
    Every job is signalled at once: the stop takes one grace period at most (the demo jobs
    checkpoint at once), never one per job; 30 s is the queue's grace."""
    os.killpg(demo.pid, signal.SIGINT)
    try:
        demo.wait(timeout=25)
    except subprocess.TimeoutExpired:
        os.killpg(demo.pid, signal.SIGKILL)
        raise
    finally:
        shutil.rmtree(repo / "var" / f"agent-{port}", ignore_errors=True)


def admin_token(lines: list[str]) -> str | None:
    """The admin's API token the demo printed, once it has."""
    pattern = r"^\s+admin\s+password \S+\s+token (\w+)"
    return next((m.group(1) for line in lines if (m := re.search(pattern, line))), None)


def exported(lines: list[str]) -> str:
    """The `export QP_URL=… TOKEN=…` line the demo prints for the docs' samples."""
    return next(line.strip() for line in lines if line.strip().startswith("export QP_URL="))


def readme_curl_submits_a_job(repo: Path, export: str) -> dict:
    """The README's curl example, exactly as written, after the line the demo printed for
    it: on whatever port the demo was given, it reaches this demo as alice."""
    readme = (repo / "README.md").read_text()
    command = re.search(r"```sh\n(curl .*?)\n```", readme, re.S).group(1)
    done = subprocess.run(
        ["bash", "-c", f"{export}\n{command} --fail-with-body --silent --show-error"],
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    created = json.loads(done.stdout)
    assert (created["job_queue"], created["quota_share"]) == ("gpu-queue", "QS1")
    assert created["status"] in ("RUNNABLE", "SCHEDULED"), "queued (or dispatched at once)"
    return created


def test_the_demo_takes_its_port_from_make_and_says_so(repo):
    planned = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", "demo", "PORT=8101"],
        cwd=repo,
        capture_output=True,
        text=True,
    ).stdout
    assert "manage.py demo --port 8101" in planned
    shown = subprocess.run(
        [sys.executable, "manage.py", "demo", "--help"], cwd=repo, capture_output=True, text=True
    ).stdout
    assert "port of the web server" in shown
    assert "make demo PORT=8101" in " ".join(shown.split())


def compose_commands(repo: Path) -> dict[str, list[str]]:
    compose = yaml.safe_load((repo / "docker-compose.yml").read_text())
    return {
        name: service["command"]
        for name, service in compose["services"].items()
        if "command" in service
    }


def test_every_compose_command_exists_in_the_project(repo):
    from django.core.management import get_commands

    bin_dir = Path(sys.executable).parent
    commands = compose_commands(repo)
    assert {"web", "worker", "beat", "agent-1", "agent-2"} <= set(commands)
    for name, command in commands.items():
        if command[:2] == ["sh", "-c"]:
            steps = [shlex.split(step) for step in command[2].split("&&")]
        else:
            steps = [command]
        for step in steps:
            if step[:2] == ["nice", "-n"]:  # a lower CPU priority for what follows
                assert shutil.which("nice"), f"{name}: nice is not installed"
                step = step[3:]
            program = step[0]
            if program == "python" and step[1] == "manage.py":
                assert step[2] in get_commands(), f"{name}: no management command {step[2]}"
            elif program == "quotaportal-agent":
                assert (bin_dir / program).exists()
                parsed = parse_agent_args(step[1:])  # the real parser accepts the flags
                assert parsed.simulate == 4
            else:
                assert (bin_dir / program).exists(), f"{name}: {program} is not installed"
    assert "celery" in commands["beat"][0]
    assert "beat" in commands["beat"]
    compose = yaml.safe_load((repo / "docker-compose.yml").read_text())
    for service in ("postgres", "redis", "web", "worker", "worker-background", "beat"):
        assert "healthcheck" in compose["services"][service], f"{service} has a health check"
    for agent in ("agent-1", "agent-2"):
        service = compose["services"][agent]
        assert set(service["environment"]) == {"QP_AGENT_TOKEN"}, "only its own token"
        assert "--token" not in service["command"]


def test_the_compose_workers_take_every_task_queue_and_the_ticks_worker_no_long_task(repo):
    from django.conf import settings

    workers = [c for c in compose_commands(repo).values() if "worker" in c and "celery" in c]
    taken = set()
    for command in workers:
        options = dict(zip(command, command[1:], strict=False))
        if "-Q" in options:
            taken |= set(options["-Q"].split(","))
        else:
            excluded = set(options.get("-X", "").split(","))
            taken |= set(settings.CELERY_TASK_QUEUES) - excluded
    assert taken == set(settings.CELERY_TASK_QUEUES), "a task queue no compose worker takes"
    ticks = compose_commands(repo)["worker"]
    assert settings.BACKGROUND_QUEUE in ticks[ticks.index("-X") + 1].split(",")


def test_the_agent_says_to_simulate_when_there_are_no_gpus(capsys, monkeypatch):
    monkeypatch.setenv("QP_AGENT_TOKEN", "t")
    assert agent_main(["--server", "http://127.0.0.1:9", "--capacity-unit", "a100"]) == 2
    assert "--simulate N" in capsys.readouterr().err


def test_the_agent_reports_an_unreachable_server(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("QP_AGENT_TOKEN", "t")
    port = free_port()
    code = agent_main(
        [
            "--server",
            f"http://127.0.0.1:{port}",
            "--capacity-unit",
            "a100",
            "--simulate",
            "1",
            "--work-dir",
            str(tmp_path),
            "--allow-root-jobs",
        ]
    )
    assert code == 3
    assert "cannot reach" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_the_agent_refuses_a_bad_token(live_server, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("QP_AGENT_TOKEN", "wrong")
    code = agent_main(
        [
            "--server",
            live_server.url,
            "--capacity-unit",
            "a100",
            "--simulate",
            "1",
            "--work-dir",
            str(tmp_path),
            "--allow-root-jobs",
        ]
    )
    assert code == 2
    assert "refused the token" in capsys.readouterr().err


def test_the_agent_keeps_going_while_the_server_is_away(tmp_path, caplog):
    agent = Agent(
        Client(f"http://127.0.0.1:{free_port()}", "t", timeout=0.5),
        name="h",
        capacity_unit="u",
        gpus=[0],
        work_dir=tmp_path,
        address="h",
        interval=0.1,
    )
    stop = threading.Event()
    runner = threading.Thread(target=agent.run, args=(stop,))
    runner.start()
    time.sleep(1.5)
    stop.set()
    runner.join(10)
    assert not runner.is_alive()
    warnings = [r.message for r in caplog.records if "unreachable" in r.message]
    assert len(warnings) >= 2
    said = " ".join(warnings)
    assert "retrying in 0.1 s" in said
    assert "retrying in 0.2 s" in said  # the wait doubles while the server stays away
