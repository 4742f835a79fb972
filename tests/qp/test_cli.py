"""qp as a scientist runs it: a subprocess against a live portal on PostgreSQL, with a real
agent running the jobs. Signed in with a token; a Slurm script submitted as it is; an array
of 100 never running more than 10 at once; an afterok chain through success and failure;
`logs -f` following 100,000 lines; --json parsed; exit codes a script can branch on."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from quotaportal.quotas.models import Job, JobAttempt, JobQueue
from quotaportal.quotas.services.fairness import set_fair_share
from quotaportal.tick.loop import SchedulerLoop
from tests.hosts.builders import Fleet, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
QP = [sys.executable, "-m", "qp"]


class Terminal:
    """A scientist's shell: qp with its own config file."""

    def __init__(self, url: str, home: Path):
        self.url, self.home = url, home
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("QP_")},
            "HOME": str(home),
            "QP_CONFIG": str(home / "qp.json"),
        }

    def run(self, *args: str, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [*QP, *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=120
        )
        if check:
            assert done.returncode == 0, f"qp {' '.join(args)}: {done.stderr}{done.stdout}"
        return done

    def json(self, *args: str) -> object:
        return json.loads(self.run(args[0], "--json", *args[1:]).stdout)


@pytest.fixture
def fleet(people, live_server, tmp_path, settings):
    settings.QP_HOST_TIMEOUT = 6
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    built = Fleet(
        people, live_server, tmp_path, shares=(("vision", "vision", 16, "LEND"),), capacity=16
    )
    built.start_agent("host-1", 16)
    loop = SchedulerLoop(period=0.2)
    loop.start()
    yield built
    loop.stop()
    built.stop()


@pytest.fixture
def alice(fleet, people, live_server, tmp_path) -> Terminal:
    terminal = Terminal(live_server.url, tmp_path / "alice")
    terminal.home.mkdir()
    terminal.run("login", live_server.url, "--token-stdin", stdin=people.tokens["alice"] + "\n")
    return terminal


def test_login_keeps_the_token_for_its_owner_only(alice, fleet):
    kept = alice.home / "qp.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert json.loads(kept.read_text())["url"] == alice.url
    me = alice.json("jobs")
    assert me == []


def test_a_wrong_token_and_no_login_exit_3(fleet, live_server, tmp_path):
    stranger = Terminal(live_server.url, tmp_path / "stranger")
    stranger.home.mkdir()
    refused = stranger.run("login", live_server.url, "--token-stdin", stdin="nope\n", check=False)
    assert refused.returncode == 3
    assert "Invalid token" in refused.stderr or "invalid" in refused.stderr.lower()
    assert not (stranger.home / "qp.json").exists()
    unsigned = stranger.run("jobs", check=False)
    assert unsigned.returncode == 3
    assert "qp login" in unsigned.stderr


def test_a_slurm_script_submits_unchanged(alice, fleet, tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=resnet\n"
        "#SBATCH --gres=gpu:gpu1:2\n"
        "#SBATCH --time=00:10:00\n"
        "#SBATCH --output=slurm-%j.out\n"
        'echo "ranks=$QP_WORLD_SIZE bash=${BASH_VERSION:+yes}"\n'
    )
    done = alice.run("submit", str(script))
    assert "--output ignored: the portal keeps the whole output" in done.stderr
    job = Job.objects.get(name="resnet")
    assert (job.quantity, job.attempt_duration_seconds, job.capacity_unit.name) == (2, 600, "gpu1")
    wait_until(lambda: Job.objects.get(pk=job.pk).status == "SUCCEEDED", what="resnet to end")
    wait_until(lambda: "bash=yes" in alice.run("logs", str(job.pk)).stdout, what="its output")
    shown = alice.json("show", "resnet")
    assert (shown["status"], shown["quantity"]) == ("SUCCEEDED", 2)


def test_an_array_of_100_never_runs_more_than_10_at_once(alice, fleet):
    made = alice.json("submit", "--array", "0-99%10", "--name", "sweep", "--", "sleep", "0.3")
    assert (made["size"], made["max_running"], made["counts"]["PENDING"]) == (100, 10, 90)

    def all_done():
        return Job.objects.filter(array_id=made["id"], status="SUCCEEDED").count() == 100

    wait_until(all_done, timeout=180, what="the 100 children to succeed")
    edges = []
    for attempt in JobAttempt.objects.filter(job__array_id=made["id"]):
        edges += [(attempt.started_at, 1), (attempt.stopped_at, -1)]
    running = most = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):  # ends before starts at a tie
        running += step
        most = max(most, running)
    assert most == 10  # 16 GPUs free, yet 10 at once, and the limit was used
    shown = alice.json("show", made["id"])
    assert shown["counts"]["SUCCEEDED"] == 100


def test_an_afterok_chain_through_success_and_failure(alice, fleet):
    first = alice.json("submit", "--name", "prep", "--", "true")
    second = alice.json("submit", "--name", "train", "--after", "prep", "--", "false")
    third = alice.json("submit", "--name", "report", "--after", f"{second['id']}:ok", "--", "true")
    cleanup = alice.json("submit", "--name", "cleanup", "--after", "train:notok", "--", "true")
    assert second["status"] == "PENDING"

    def status(job):
        return Job.objects.get(pk=job["id"]).status

    wait_until(
        lambda: status(third) == "FAILED" and status(cleanup) == "SUCCEEDED",
        timeout=60,
        what="the chain to settle",
    )
    assert (status(first), status(second)) == ("SUCCEEDED", "FAILED")
    report = alice.json("show", "report")
    assert report["status_reason"] == "Dependency not met: job train failed (it was to succeed)"
    listed = alice.run("show", "report").stdout
    assert "afterok" in listed


def test_logs_follow_a_job_printing_100000_lines(alice, fleet):
    made = alice.json(
        "submit", "--name", "chatty", "--", "sh", "-c", "seq 1 50000; sleep 2; seq 50001 100000"
    )
    follower = subprocess.run(
        [*QP, "logs", "-f", made["id"]], capture_output=True, env=alice.env, timeout=120
    )
    assert follower.returncode == 0, follower.stderr
    assert follower.stdout == b"".join(b"%d\n" % i for i in range(1, 100_001))


def test_json_and_exit_codes_for_scripts(alice, fleet, people, live_server, tmp_path):
    bad = alice.run("submit", "--instances", "99", "--json", "--", "true", check=False)
    assert bad.returncode == 1
    answer = json.loads(bad.stdout)
    assert answer["status"] == 400
    assert "quantity" in answer["detail"]
    # The ranges are the portal's (one source): qp sends what it was given and says its answer.
    urgent = alice.run("submit", "--priority", "12000", "--", "true", check=False)
    assert urgent.returncode == 1
    assert "scheduling_priority" in urgent.stderr
    assert "9999" in urgent.stderr
    wide = alice.run("submit", "--array", "0-10000", "--", "true", check=False)
    assert wide.returncode == 1
    assert "array_size" in wide.stderr
    assert "10000" in wide.stderr
    endless = alice.run("submit", "--time-limit", "9" * 40, "--", "true", check=False)
    assert endless.returncode == 1
    assert "attempt_duration_seconds" in endless.stderr
    missing = alice.run("show", "00000000-0000-4000-8000-000000000000", check=False)
    assert missing.returncode == 5
    bob = Terminal(live_server.url, tmp_path / "bob")
    bob.home.mkdir()
    bob.run("login", live_server.url, "--token-stdin", stdin=people.tokens["bob"] + "\n")
    mine = alice.json("submit", "--name", "mine", "--", "sleep", "30")
    stolen = bob.run("cancel", mine["id"], check=False)
    assert stolen.returncode == 4
    assert "another team" in stolen.stderr
    assert alice.json("cancel", mine["id"])["cancelled"] == [mine["id"]]
    listed = alice.json("jobs", "--me", "--status", "FAILED")
    assert [job["name"] for job in listed] == ["mine"]
    assert alice.run("completion", "bash").stdout.startswith("_qp_completion()")


def test_shares_show_each_standing_under_a_fair_share_policy(alice, fleet, people):
    (row,) = alice.json("shares")
    assert (row["quota_share"], row["fair_share_standing"]) == ("vision", None)
    assert "—" in alice.run("shares").stdout
    queue = JobQueue.objects.get(name=row["job_queue"])
    set_fair_share(people.admin, queue, half_life_seconds=3600, seed={"vision": 7200.0})
    (row,) = alice.json("shares")
    assert row["fair_share_standing"] == pytest.approx(2.0, abs=0.05)
    assert "STANDING" in alice.run("shares").stdout
