"""A batch of reports that frees capacity ticks its environment itself and is answered with
the host's next work; the agent starts it from that answer, and an older answer arriving
later never stops what a newer one started."""

from __future__ import annotations

import pytest

from quotaportal.hosts import services as host_services
from quotaportal.hosts.agent.agent import Agent
from quotaportal.quotas import services
from quotaportal.quotas.models import Job, SchedulerRun
from quotaportal.quotas.services import tick, ticks
from tests.conftest import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def one_slot(people, settings, monkeypatch):
    """A LOCAL queue with one GPU, a job running on it and one waiting; the ticks that
    changes enqueue are recorded instead of sent to a broker."""
    settings.QP_HOST_TIMEOUT = 60
    settings.QP_IMMEDIATE_TICKS = True
    enqueued = []
    monkeypatch.setattr(ticks, "enqueue_tick", enqueued.append)
    monkeypatch.setattr(ticks, "_slow_inline", {})
    env, queue = build_queue(people.admin, unit="gpu1", capacity=1, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 1, "LEND", unit="gpu1")
    token = host_services.token_for(host_services.create_agent_token(people.admin, env, "gpu-1"))
    host_services.register_host(token, name="gpu-1", capacity_unit="gpu1", gpus=[0])
    first, second = (
        services.submit_job(
            people.admin, job_queue=queue, quota_share="a", capacity_unit="gpu1", name=name
        )
        for name in ("first", "second")
    )
    services.run_tick(queue.pk)
    running = host_services.heartbeat(token, "gpu-1", [])["placements"]
    assert [p["job_id"] for p in running] == [str(first.pk)]
    enqueued.clear()
    return token, queue, running[0]["placement"], second, enqueued


def exit_of(placement, code=0):
    return [
        {"placement": placement, "event": "started"},
        {"placement": placement, "event": "exited", "exit_code": code},
    ]


def test_a_batch_that_frees_a_gpu_is_answered_with_the_next_job_and_enqueues_no_tick(one_slot):
    token, queue, placement, second, enqueued = one_slot
    batch = host_services.report_many(token, "gpu-1", exit_of(placement))
    assert batch.errors == [None, None]
    assert batch.work is not None, "the exit freed the GPU: the answer says what runs next"
    assert [p["job_id"] for p in batch.work["placements"]] == [str(second.pk)]
    assert batch.work["horizon"] >= batch.work["placements"][0]["placement"]
    assert Job.objects.get(pk=second.pk).status == "SCHEDULED"
    assert enqueued == [], "the batch ticked itself; no worker tick is needed"


def test_a_batch_that_frees_nothing_is_answered_with_its_results_only(one_slot):
    token, _, placement, _, enqueued = one_slot
    batch = host_services.report_many(
        token, "gpu-1", [{"placement": placement, "event": "started"}]
    )
    assert batch.work is None
    assert enqueued == []


def test_an_inline_tick_that_fails_keeps_the_reports_and_enqueues_the_tick(one_slot, monkeypatch):
    token, queue, placement, second, enqueued = one_slot

    def broken(*args, **kwargs):
        raise RuntimeError("planner bug")

    monkeypatch.setattr(tick, "run_environment_tick", broken)
    batch = host_services.report_many(token, "gpu-1", exit_of(placement))
    assert batch.errors == [None, None]
    assert batch.work is None
    assert Job.objects.filter(job_queue=queue, status="SUCCEEDED").count() == 1
    assert enqueued == [queue.pk], "the change still gets its tick, from a worker"
    assert Job.objects.get(pk=second.pk).status == "RUNNABLE"


def test_a_slow_inline_tick_sends_the_next_ones_to_the_workers(one_slot, people, monkeypatch):
    token, queue, placement, second, enqueued = one_slot
    monkeypatch.setattr(ticks, "INLINE_TICK_BUDGET_SECONDS", 0.0)  # every tick is too slow
    runs = SchedulerRun.objects.count()
    assert host_services.report_many(token, "gpu-1", exit_of(placement)).work is not None
    assert SchedulerRun.objects.count() == runs + 1
    services.submit_job(
        people.admin, job_queue=queue, quota_share="a", capacity_unit="gpu1", name="third"
    )
    enqueued.clear()
    nxt = host_services.heartbeat(token, "gpu-1", [])["placements"][0]["placement"]
    batch = host_services.report_many(token, "gpu-1", exit_of(nxt))
    assert batch.work is None, "within the cool-down the batch does not tick"
    assert enqueued == [queue.pk]


def test_a_failed_rank_in_a_batch_retries_the_job_as_a_report_alone_would(one_slot):
    token, queue, placement, second, _ = one_slot
    first = Job.objects.get(job_queue=queue, name="first")
    Job.objects.filter(pk=first.pk).update(retry_attempts=2)
    batch = host_services.report_many(token, "gpu-1", exit_of(placement, code=3))
    first.refresh_from_db()
    assert batch.errors == [None, None]
    failed = first.attempts.get(number=1)
    assert (failed.status_reason, failed.exit_code) == ("Exited with code 3", 3)
    # Retried, and (first in line) started again by the batch's own tick.
    assert (first.status, first.attempt_count, first.attempts.count()) == ("SCHEDULED", 1, 2)


def test_a_batch_out_of_lifecycle_order_is_applied_report_by_report(one_slot):
    token, queue, placement, _, _ = one_slot
    batch = host_services.report_many(
        token,
        "gpu-1",
        [
            {"placement": placement, "event": "exited", "exit_code": 0},
            {"placement": placement, "event": "started"},
            {"placement": 424242, "event": "output", "output_tail": "x"},
        ],
    )
    assert batch.errors[:2] == [None, None]
    assert "placement 424242 is not on host gpu-1" in batch.errors[2]
    assert Job.objects.get(job_queue=queue, name="first").status == "SUCCEEDED"


class Recording(Agent):
    """An agent that records what it would reconcile to instead of starting processes."""

    def reconcile(self, desired):
        self.reconciled = [spec["placement"] for spec in desired]


def spec(placement):
    return {"placement": placement, "job_id": f"job-{placement}", "gpu_indices": [0]}


@pytest.fixture
def agent(tmp_path):
    return Recording(
        client=None, name="gpu-1", capacity_unit="gpu1", gpus=[0, 1], work_dir=tmp_path, address=""
    )


def test_an_older_answer_arriving_late_does_not_drop_work_a_newer_one_brought(agent):
    agent.take({"placements": [spec(7), spec(9)], "horizon": 9})  # a report's answer
    agent.take({"placements": [spec(7)], "horizon": 8})  # a heartbeat read before 9 existed
    assert agent.reconciled == [7, 9]


def test_a_newer_answer_that_leaves_a_placement_out_stops_it(agent):
    agent.take({"placements": [spec(7), spec(9)], "horizon": 9})
    agent.take({"placements": [spec(7)], "horizon": 10})
    assert agent.reconciled == [7]


def test_an_answer_without_a_horizon_says_all_that_should_run(agent):
    agent.take({"placements": [spec(7), spec(9)], "horizon": 9})
    agent.take({"placements": [spec(3)]})  # an older server
    assert agent.reconciled == [3]
