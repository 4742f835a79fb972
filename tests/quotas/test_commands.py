"""Management commands: create_user, tick, run_scenario, bench_tick, bench_replay_ticks."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from quotaportal.quotas.models import Job
from quotaportal.quotas.services import tokens
from tests.builders import scenario_files, submit


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


@pytest.mark.django_db
def test_create_user_prints_the_api_token_last():
    out = run("create_user", "carol", "--team", "vision", "--team", "nlp", "--admin")
    token = out.strip().splitlines()[-1]
    assert tokens.find(token).user.username == "carol"
    assert not Token.objects.exists()  # only personal tokens are made now, stored hashed
    assert "carol (admin, vision, nlp)" in out


def test_tick_command_ticks_every_queue(people, fleet):
    job = submit(people.alice, fleet)
    assert "gpu: dispatched 1, preempted 0" in run("tick")
    assert Job.objects.get(pk=job.pk).status == "SCHEDULED"


@pytest.mark.django_db
def test_run_scenario_prints_the_same_lines_as_the_pure_runner(capsys):
    files = [str(p) for p in scenario_files()]
    out = run("run_scenario", *files)
    lines = out.strip().splitlines()
    assert lines[-1] == f"{len(lines) - 1} passed, 0 failed"
    assert not Job.objects.exists(), "run_scenario rolls its data back unless --keep"


@pytest.mark.django_db
def test_run_scenario_fails_on_a_malformed_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(SystemExit) as exit_info:
        run("run_scenario", str(bad))
    assert exit_info.value.code == 1


@pytest.mark.django_db
def test_bench_tick_reports_its_figures():
    out = run(
        "bench_tick",
        "--runnable",
        "300",
        "--dispatched",
        "60",
        "--shares",
        "8",
        "--dispatch",
        "20",
        "--repeat",
        "1",
        "--json",
    )
    figures = json.loads(out)
    assert {
        "tick_ms",
        "select_ms",
        "ratio",
        "replan_ms",
        "full_plan_ms",
        "dispatch_tick_ms",
    } <= set(figures)
    assert figures["runnable"] == 300
    assert figures["dispatch_tick_started"] > 0
    assert not Job.objects.exists(), "bench_tick rolls its data back"


@pytest.mark.django_db
def test_bench_tick_measures_a_curve_of_sizes_in_one_run():
    out = run("bench_tick", "--runnable", "50,400", "--dispatched", "20", "--shares", "4")
    out += run("bench_tick", "--runnable", "50,400", "--shares", "4", "--repeat", "1", "--json")
    assert [row["runnable"] for row in json.loads(out.splitlines()[-1])] == [50, 400]
    assert "dispatch_tick_ms" in out


def test_bench_tick_says_what_to_fix_in_a_bad_size():
    with pytest.raises(CommandError, match="separated by commas"):
        run("bench_tick", "--runnable", "10k")


@pytest.mark.django_db(transaction=True)
def test_bench_replay_ticks_reports_a_ticks_cost_at_the_kueue_shape(settings):
    settings.QP_IMMEDIATE_TICKS = False  # as scripts/bench_replay.py --in-process runs it
    figures = json.loads(run("bench_replay_ticks", "--json").splitlines()[-1])
    assert (figures["jobs"], figures["queues"]) == (3000, 1)
    assert figures["ticks"] >= 600, "every job ended, a tick every 0.1 s of the clock"
    assert figures["tick_ms_p50"] > 0
    assert figures["statements_unchanged"] >= 1
    assert figures["statements_planned"] > figures["statements_unchanged"]
    assert not Job.objects.exclude(status="SUCCEEDED").exists()


@pytest.mark.django_db
def test_bench_replay_ticks_refuses_a_database_with_queues_and_bad_sizes(fleet):
    with pytest.raises(CommandError, match="run it on an empty one"):
        run("bench_replay_ticks")
    with pytest.raises(CommandError, match="--queues must be between 1 and 5"):
        run("bench_replay_ticks", "--queues", "9")
