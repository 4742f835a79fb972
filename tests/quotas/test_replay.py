"""The simulator and the whole control plane agree, and workloads come out of the database."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from quotaportal.whatif.replays.history import parse_duration, queue_history
from quotaportal.whatif.replays.stack import (
    RealClock,
    VirtualClock,
    latencies,
    replay,
    setup_queues,
)
from scheduler import Share, Strategy
from scheduler.simulate import QueueConfig, QueueWorkload, WorkJob, Workload, simulate
from scheduler.simulate.workload import load_workload
from tests.builders import submit


def _workload() -> Workload:
    shares = (
        Share("vision", {"a100": 2}, Strategy.LEND_AND_BORROW, 100, True),
        Share("nlp", {"a100": 2}, Strategy.LEND),
        Share("infra", {"a100": 1}, Strategy.RESERVE),
    )
    jobs = (
        WorkJob("v1", "vision", "a100", 2, 10, 0.0, 6.0),
        WorkJob("v2", "vision", "a100", 2, 10, 0.4, 4.0),  # borrows nlp's idle pair
        WorkJob("n1", "nlp", "a100", 1, 0, 1.5, 3.0),  # reclaims: v2 is preempted
        WorkJob("v3", "vision", "a100", 1, 5, 2.2, 2.0, ((3.5, 50),)),  # raised above v1
        WorkJob("i1", "infra", "a100", 1, 0, 3.1, 5.0),
        WorkJob("n2", "nlp", "a100", 1, 0, 4.7, 1.0),
        WorkJob("v4", "vision", "a100", 1, 1, 6.3, 0.5),
    )
    config = QueueConfig("agree", {"a100": 5}, shares)
    return Workload("agree", (QueueWorkload(config, jobs),))


def _database_outcomes(result, clock) -> dict:
    """Per job: when each attempt got capacity, when it ended, how often it was preempted."""
    outcomes = {}
    for name, pk in result.job_ids.items():
        job = Job.objects.get(pk=pk)
        dispatches = [
            (at - clock.origin).total_seconds()
            for at in job.attempts.order_by("number").values_list("started_at", flat=True)
        ]
        ended = (job.stopped_at - clock.origin).total_seconds() if job.stopped_at else None
        outcomes[name] = (dispatches, ended, job.preempted_count)
    return outcomes


def test_the_simulator_on_a_fixed_tick_and_the_full_stack_start_the_same_jobs_in_the_same_ticks(
    db,
):
    workload = _workload()
    simulated = simulate(workload, tick_s=1.0)
    clock = VirtualClock()
    queues = setup_queues(workload, "agree")
    result = replay(workload, queues, clock=clock, tick_s=1.0)
    assert result.unfinished == 0
    expected = {
        job_id: (o.dispatches, o.end_s, len(o.preemptions))
        for job_id, o in simulated.runs[0].outcomes.items()
    }
    assert _database_outcomes(result, clock) == expected
    assert simulated.summary["preemptions"] >= 2  # the story has a reclaim and an in-share


def test_a_queues_history_exports_as_a_workload_the_simulator_reads(people, fleet, tmp_path):
    from django.utils import timezone

    t0 = timezone.now() - timedelta(hours=1)
    done = submit(people.alice, fleet, name="done", now=t0)
    run_tick(fleet.queue.id, now=t0)
    services.mark_started(done, now=t0 + timedelta(seconds=5))
    services.end_attempt(
        done, succeeded=True, status_reason="ok", exit_code=0, now=t0 + timedelta(seconds=65)
    )
    bumped = submit(people.alice, fleet, name="bumped", now=t0 + timedelta(seconds=10))
    services.set_priority(people.alice, bumped, 7)
    run_tick(fleet.queue.id, now=t0 + timedelta(seconds=30))
    services.mark_started(bumped, now=t0 + timedelta(seconds=31))  # still running
    submit(people.alice, fleet, name="never", now=t0 + timedelta(seconds=40))  # never ran

    workload = queue_history(fleet.queue, timedelta(days=1))
    (queue,) = workload.queues
    by_name = {Job.objects.get(pk=j.id).name: j for j in queue.jobs}
    assert by_name["done"].duration_s == 60
    assert by_name["done"].submit_s == 0
    assert "never" not in by_name
    assert by_name["bumped"].priority == 0  # as submitted, then raised
    assert [p for _, p in by_name["bumped"].priority_changes] == [7]
    assert by_name["bumped"].duration_s > 3000  # running for about an hour so far
    assert {s.name for s in queue.config.shares} == {"vision", "nlp"}
    # The notes count what was submitted, what was replayed, and what was left out, apart.
    submitted, durations = workload.notes
    assert "3 jobs submitted since" in submitted
    assert durations == (
        "2 jobs replayed, each as long as its last run (1 still running: as long as so far); "
        "1 job never ran and was left out"
    )

    path = tmp_path / "history.json"
    call_command("export_workload", "gpu", "--since", "2h", "--output", str(path))
    assert [j.id for j in load_workload(path).queues[0].jobs] == [str(done.pk), str(bumped.pk)]
    assert json.loads(path.read_text())["queues"][0]["capacity"] == {"a100": 4}


@pytest.mark.parametrize(("text", "seconds"), [("7d", 604800), ("12h", 43200), ("90s", 90)])
def test_durations_are_read_as_people_write_them(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "7", "0d", "-1h", "1w", "1.5h"])
def test_a_bad_duration_says_what_is_accepted(text):
    with pytest.raises(ValueError, match="whole number and s, m, h or d"):
        parse_duration(text)


def test_the_commands_refuse_what_they_cannot_do_with_a_clear_message(db, tmp_path):
    with pytest.raises(CommandError, match="no job queue named 'nope'"):
        call_command("export_workload", "nope")
    with pytest.raises(CommandError, match="--since"):
        call_command("export_workload", "nope", "--since", "soon")
    bad = tmp_path / "w.json"
    bad.write_text("[]")
    with pytest.raises(CommandError, match="one JSON object"):
        call_command("replay", str(bad), "--setup", "x")


def test_a_replays_time_is_its_last_jobs_end_not_when_the_replay_looked(db):
    """The replay looks at its jobs now and then (POLL_S, and here a slow progress report);
    the workload's time is when the last job ended on the services' clock."""
    workload = Workload(
        "late-look",
        (
            QueueWorkload(
                QueueConfig("late-look", {"a100": 1}, (Share("solo", {"a100": 1}),)),
                (WorkJob("j1", "solo", "a100", 1, 0, 0.0, 0.2),),
            ),
        ),
    )
    queues = setup_queues(workload, "late-look")
    clock = RealClock()

    def slow_progress(done, total):
        time.sleep(0.4)  # a watcher that looks late

    result = replay(workload, queues, clock=clock, tick_s=0.1, progress=slow_progress)
    assert result.unfinished == 0
    job = Job.objects.get(pk=result.job_ids["j1"])
    assert result.wall_s == clock.seconds_between(result.began_at, job.stopped_at)
    assert result.wall_s < clock.elapsed() - 0.4  # the late looks are not the workload's time


def test_a_replay_says_how_late_the_stack_acted_on_its_moments(db):
    """On a 1 s tick a SIMULATED job starts one tick after its dispatch and ends on the first
    tick at or after its duration: the latencies read back from the jobs and the ticks."""
    workload = _workload()
    queues = setup_queues(workload, "lags")
    result = replay(workload, queues, clock=VirtualClock(), tick_s=1.0)
    lags = latencies(result)
    assert lags["start_after_dispatch_ms_p50"] == 1000.0
    assert 0 <= lags["end_after_duration_ms_mean"] < 1000
    assert 0 <= lags["end_after_duration_ms_p90"] < 1000
    assert lags["ticks_run"] == result.ticks  # one queue, ticked once a grid step, none skipped
    assert lags["tick_ms_mean"] > 0
