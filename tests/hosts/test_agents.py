"""Two real quotaportal-agent processes (simulated GPUs) against a live server on PostgreSQL."""

from __future__ import annotations

import os
import shlex
import signal
import sys

import pytest
from rest_framework.test import APIClient

from quotaportal.hosts.models import GpuHost, Placement
from quotaportal.quotas import services
from quotaportal.quotas.models import Event, EventKind, Job
from quotaportal.tick.loop import SchedulerLoop
from tests.hosts.builders import Fleet, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
PYTHON = shlex.quote(sys.executable)


@pytest.fixture
def fleet(people, live_server, tmp_path, settings):
    settings.QP_HOST_TIMEOUT = 3
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    built = Fleet(people, live_server, tmp_path)
    built.start_agent("host-1")
    built.start_agent("host-2")
    loop = SchedulerLoop(period=0.3)
    loop.start()
    yield built
    loop.stop()
    built.stop()


def test_exit_codes_map_to_succeeded_retried_and_failed(fleet):
    ok = fleet.submit(name="ok", command="echo hello; exit 0")
    bad = fleet.submit(name="bad", command="echo oops; exit 3", retry_attempts=2)
    wait_until(lambda: fleet.status(ok) == "SUCCEEDED", what="ok to succeed")
    wait_until(lambda: fleet.status(bad) == "FAILED", what="bad to fail")
    bad = Job.objects.get(pk=bad.pk)
    assert (bad.attempt_count, bad.status_reason) == (2, "Exited with code 3")
    assert [a.exit_code for a in bad.attempts.all()] == [3, 3]
    tail = Placement.objects.filter(attempt__job=ok).get().output_tail
    assert "hello" in tail


def test_concurrent_jobs_on_one_host_see_disjoint_gpus(fleet):
    command = "echo $CUDA_VISIBLE_DEVICES > $QP_CHECKPOINT_DIR/gpus; sleep 3"
    jobs = [fleet.submit(name=f"j{i}", command=command) for i in range(2)]
    wait_until(
        lambda: all(fleet.status(j) == "SUCCEEDED" for j in jobs), what="both jobs to finish"
    )
    hosts = {Placement.objects.get(attempt__job=j).host.name for j in jobs}
    assert hosts == {"host-1"}, "two one-GPU jobs share the fullest host that holds them"
    seen = [fleet.checkpoint("host-1", j).joinpath("gpus").read_text().strip() for j in jobs]
    assert sorted(seen) == ["0", "1"]


def test_a_preempted_job_checkpoints_on_sigterm_and_the_preemptor_starts_after_it_exits(fleet):
    long_job = f"{PYTHON} -m quotaportal.hosts.demo_job --seconds 120"
    borrowers = [fleet.submit(name=f"a{i}", command=long_job) for i in range(4)]
    wait_until(
        lambda: all(fleet.status(j) == "RUNNING" for j in borrowers), what="a to fill all 4 GPUs"
    )
    # RUNNING comes as the process starts; a job can checkpoint once its handler is set,
    # which it says in its first line. (Work is pushed at once: no heartbeat's delay now.)
    wait_until(
        lambda: all("starting at step" in fleet.output(j) for j in borrowers),
        what="the jobs to set their SIGTERM handlers",
    )
    stamp = "date +%s.%N > $QP_CHECKPOINT_DIR/started; sleep 1"
    preemptor = fleet.submit(share="b", name="b1", command=stamp)
    wait_until(lambda: fleet.status(preemptor) == "SUCCEEDED", timeout=40, what="b1 to run")
    victim = next(j for j in borrowers if Job.objects.get(pk=j.pk).preempted_count == 1)
    placement = Placement.objects.filter(attempt__job=victim).first()
    checkpoint = fleet.checkpoint(placement.host.name, victim) / "step"
    assert checkpoint.exists(), "the victim's SIGTERM handler wrote its checkpoint"
    b_placement = Placement.objects.get(attempt__job=preemptor)
    started = float(
        fleet.checkpoint(b_placement.host.name, preemptor).joinpath("started").read_text()
    )
    assert b_placement.host == placement.host
    assert started >= checkpoint.stat().st_mtime, (
        "the preemptor started only after the victim exited"
    )
    placement.refresh_from_db()
    assert "SIGTERM: checkpoint written" in placement.output_tail
    # The preemption started when the tick chose the victim and completed when its process
    # had exited after checkpointing (AWS's two preemption events), not at once.
    began = Event.objects.get(job=victim, kind=EventKind.PREEMPTED_CROSS_SHARE).time
    ended = Event.objects.get(job=victim, kind=EventKind.PREEMPTION_COMPLETED).time
    assert ended == placement.exited_at
    assert ended > began


def test_a_killed_agent_makes_its_host_lost_and_its_jobs_run_again_elsewhere(fleet):
    job = fleet.submit(name="survivor", command="sleep 4", retry_attempts=3)
    wait_until(lambda: fleet.status(job) == "RUNNING", what="the job to start")
    first_host = Placement.objects.get(attempt__job=job).host.name
    fleet.agents[first_host].send_signal(signal.SIGKILL)
    wait_until(
        lambda: GpuHost.objects.get(name=first_host).state == "LOST", timeout=15, what="host LOST"
    )
    wait_until(
        lambda: fleet.status(job) == "SUCCEEDED", timeout=40, what="the job to finish elsewhere"
    )
    attempts = list(Job.objects.get(pk=job.pk).attempts.order_by("number"))
    assert attempts[0].status_reason == "Host lost"
    assert attempts[-1].placements.get().host.name != first_host
    assert Job.objects.filter(pk=job.pk).exists()


def test_a_multi_host_job_gets_ranks_zero_to_n_minus_one(fleet):
    command = "echo $QP_RANK $QP_WORLD_SIZE $QP_MASTER_ADDR > $QP_CHECKPOINT_DIR/rank-$QP_RANK"
    job = fleet.submit(name="wide", command=command, quantity=3)
    wait_until(lambda: fleet.status(job) == "SUCCEEDED", what="the wide job to finish")
    placements = list(Placement.objects.filter(attempt__job=job).order_by("rank"))
    assert [p.rank for p in placements] == [0, 1]
    assert sorted(len(p.slot_numbers) for p in placements) == [1, 2]
    lines = sorted(
        fleet.checkpoint(p.host.name, job).joinpath(f"rank-{p.rank}").read_text().split()
        for p in placements
    )
    master = placements[0].host.name
    assert lines == [["0", "2", master], ["1", "2", master]]


def test_a_running_jobs_output_is_visible_before_it_ends(fleet):
    job = fleet.submit(name="chatty", command="echo warming-up; sleep 30")
    wait_until(lambda: fleet.status(job) == "RUNNING", what="the job to start")

    def shows_output():
        placement = Placement.objects.filter(attempt__job=job).first()
        return placement is not None and "warming-up" in placement.output_tail

    wait_until(shows_output, timeout=15, what="the output tail while running")
    assert fleet.status(job) == "RUNNING"


HOLDS_ON = (
    f'{PYTHON} -c "import signal, time; signal.signal(signal.SIGTERM, lambda *a: None); '
    "print('ignoring SIGTERM', flush=True); time.sleep(120)\""
)


def test_a_victim_stays_running_in_preemption_until_its_ranks_stop_then_waits_again(fleet, people):
    """AWS keeps a preempted job RUNNING (PREEMPTION_IN_PROGRESS) until it has stopped; here a
    rank that ignores SIGTERM holds its GPU for the queue's grace period (5 s)."""
    from quotaportal.awsbatch.described_jobs import describe_shape
    from quotaportal.notifications.envelopes import notices

    borrowers = [fleet.submit(name=f"a{i}", command=HOLDS_ON) for i in range(4)]
    wait_until(
        lambda: all("ignoring SIGTERM" in fleet.output(j) for j in borrowers),
        what="a to fill all 4 GPUs, each ignoring SIGTERM",
    )
    wait_until(lambda: all(fleet.status(j) == "RUNNING" for j in borrowers), what="a to run")
    for job in borrowers:  # each was handed to its host (STARTING) before it ran
        kinds = list(Event.objects.filter(job=job).order_by("id").values_list("kind", flat=True))
        assert kinds[:4] == ["submitted", "dispatched", "starting", "started"]
    preemptor = fleet.submit(share="b", name="b1", command="sleep 60")
    wait_until(
        lambda: Job.objects.filter(pk__in=[j.pk for j in borrowers], preempted_count=1).exists(),
        what="the reclaim",
    )
    victim = Job.objects.get(pk__in=[j.pk for j in borrowers], preempted_count=1)
    shape = describe_shape(victim)
    assert shape["status"] == "RUNNING"
    assert shape["statusReason"].startswith("PREEMPTION_IN_PROGRESS: ")
    assert shape["startedAt"] == shape["attempts"][-1]["startedAt"] > 0  # running since then
    assert victim.preemption_stopping
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {people.tokens['alice']}")
    running = api.get("/api/v1/jobs/?status=RUNNING").json()["results"]
    assert {j["id"]: j["status"] for j in running}[str(victim.pk)] == "RUNNING"
    waiting = api.get("/api/v1/jobs/?status=runnable").json()["results"]
    assert str(victim.pk) not in {j["id"] for j in waiting}

    wait_until(
        lambda: not Job.objects.get(pk=victim.pk).preemption_stopping,
        timeout=20,
        what="the victim's rank to be killed after the grace period",
    )
    wait_until(lambda: fleet.status(preemptor) == "RUNNING", what="b1 to start on the freed GPU")
    victim.refresh_from_db()
    assert victim.status == "RUNNABLE"  # b1 holds the GPU: the victim waits in line
    assert describe_shape(victim)["status"] == "RUNNABLE"
    assert victim.attempts.count() == 1, "it was not planned again while its rank stopped"
    completed = Event.objects.get(job=victim, kind=EventKind.PREEMPTION_COMPLETED)
    assert completed.detail["requeued"] is True
    assert completed.time == victim.attempts.get().placements.get().exited_at
    started = Event.objects.get(job=victim, kind=EventKind.PREEMPTED_CROSS_SHARE)
    # What webhooks hear: the preemption started with the job RUNNING; then, once its rank
    # stopped, the preemption completed and the job went back to RUNNABLE.
    assert [n.detail_type for n in notices(started, victim)] == [
        "Batch Service Job Preemption Started"
    ]
    after = notices(completed, victim)
    assert [(n.detail_type, n.status) for n in after][-1] == (
        "Batch Service Job State Change",
        "RUNNABLE",
    )


def test_an_arrays_children_each_see_their_index(fleet):
    sweep = services.submit_array(
        fleet.admin,
        size=3,
        max_running=2,
        job_queue=fleet.queue,
        quota_share="a",
        capacity_unit="gpu1",
        name="sweep",
        command='echo "index=$QP_ARRAY_INDEX aws=$AWS_BATCH_JOB_ARRAY_INDEX"',
    )
    children = list(sweep.children.order_by("array_index"))
    for child in children:
        wait_until(lambda c=child: fleet.status(c) == "SUCCEEDED", what=f"{child.name} to end")
    assert [fleet.output(c).strip() for c in children] == [f"index={i} aws={i}" for i in range(3)]
