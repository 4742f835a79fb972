"""The soak script end to end, briefly: the production-mode stack under load while agents are
killed and its own broker and database go down in turn, then its own checks (nothing lost,
nothing twice, capacity kept, no 5xx but the outages' 503s, the worker alive, /healthz
healthy again)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_a_short_soak_with_agents_killed_and_servers_down_passes_every_check(repo):
    done = subprocess.run(
        [
            sys.executable,
            "scripts/soak.py",
            "--minutes",
            "0.5",
            "--agents",
            "2",
            "--threads",
            "2",
            "--kill-every",
            "6",
            "--drain-minutes",
            "4",
            "--outages",
            "--outage-every",
            "8",
            "--outage-seconds",
            "5",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = done.stdout[done.stdout.index("\n{\n") + 1 : done.stdout.rindex("}") + 1]
    figures = json.loads(report)
    assert figures["checks"] == dict.fromkeys(figures["checks"], True), done.stdout[-3000:]
    assert figures["jobs_accepted"] > 10
    assert sum(figures["agent_kills"].values()) >= 2
    assert figures["outages"].keys() == {"broker", "database"}, done.stdout[-3000:]
    assert figures["checks"]["worker_outlived_the_outages"]
    assert done.returncode == 0
