"""Every runnable sample of the docs runs, against a live test server seeded with the demo's
world, so the docs cannot drift from the product (see docs/development/testing.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection

from tests.docs.samples import REPO, Sample, all_samples, samples_in

DEMO_URL = "http://127.0.0.1:8000"
SAMPLE_SECONDS = 120
RUNNABLE = [sample for sample in all_samples() if not sample.not_tested]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def docs_world(live_server, tmp_path) -> dict[str, str]:
    """The demo's world on the live server, and the environment a sample runs in."""
    seeded = StringIO()
    call_command("seed_demo", password="docs-sample-password", stdout=seeded)
    tokens = {
        fields[1]: fields[fields.index("token") + 1]
        for fields in (line.split() for line in seeded.getvalue().splitlines())
        if fields[:1] == ["user"]
    }
    key = StringIO()
    call_command("create_aws_key", "alice", stdout=key, stderr=StringIO())
    key_id, secret = key.getvalue().split()
    return {
        **sample_environment(tmp_path),
        "TOKEN": tokens["alice"],
        "ADMIN_TOKEN": tokens["admin"],
        "AWS_ACCESS_KEY_ID": key_id,
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_ENDPOINT_URL_BATCH": f"{live_server.url}/aws/batch",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "QP_LIVE_URL": live_server.url,
        "QP_URL": live_server.url,  # as the demo's printout exports it
    }


def sample_environment(tmp_path: Path) -> dict[str, str]:
    """The test database for commands a sample runs, and a `curl` that fails on an HTTP error
    (as a reader would notice one): otherwise a sample answered 400 would pass."""
    shims = tmp_path / "bin"
    shims.mkdir()
    curl = shims / "curl"
    curl.write_text(
        f'#!/bin/sh\nexec {shutil.which("curl")} --fail-with-body --silent --show-error "$@"\n'
    )
    curl.chmod(0o755)
    database = connection.settings_dict
    url = (
        f"postgres://{database['USER']}@{database['HOST'] or '127.0.0.1'}:"
        f"{database['PORT'] or 5432}/{database['NAME']}"
    )
    return {
        **os.environ,
        "PATH": f"{shims}:{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "DATABASE_URL": url if database["ENGINE"].endswith("postgresql") else "",
        "HOME": str(tmp_path),
    }


def run_sample(sample: Sample, env: dict[str, str]) -> subprocess.CompletedProcess:
    code = sample.code.replace(DEMO_URL, env["QP_LIVE_URL"])
    command = ["bash", "-e", "-o", "pipefail", "-c", code]
    if sample.lang == "python":
        command = [sys.executable, "-c", code]
    return subprocess.run(
        command,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=SAMPLE_SECONDS,
    )


def explain(sample: Sample, done: subprocess.CompletedProcess) -> str:
    return (
        f"the sample at {sample.name} failed (exit {done.returncode}):\n{sample.code}\n"
        f"--- its output ---\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize("sample", RUNNABLE, ids=[sample.name for sample in RUNNABLE])
def test_the_docs_sample_runs(sample, docs_world):
    done = run_sample(sample, docs_world)
    assert done.returncode == 0, explain(sample, done)


def test_a_broken_sample_fails_with_its_place_and_output(docs_world):
    broken = samples_in(Path(__file__).parent / "fixtures" / "broken.md")
    assert [sample.lang for sample in broken if not sample.not_tested] == ["sh", "python", "sh"]
    for sample in broken:
        if sample.not_tested:
            continue
        done = run_sample(sample, docs_world)
        assert done.returncode != 0, f"{sample.name} passed, but it is broken"
        assert "broken.md:" in explain(sample, done)


def test_every_sample_is_run_or_says_why_not():
    """A block marked sh or python is run; one that cannot be says so in its comment (the
    pattern needs a reason), and there are samples at all."""
    assert len(RUNNABLE) >= 8
    for sample in all_samples():
        assert sample.not_tested or sample.code.strip(), f"{sample.name} is empty"
