"""A batch of reports that frees capacity ticks its environment itself and is answered with
the host's next work; the agent starts it from that answer, and an older answer arriving
later never stops what a newer one started. Reports date their events by their age."""

from __future__ import annotations

import time
from datetime import timedelta
from functools import partial

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from quotaportal.api.agent import AgentTokenAuthentication
from quotaportal.hosts import services as host_services
from quotaportal.hosts.agent.agent import Agent
from quotaportal.hosts.agent.reporter import MAX_AGE, aged
from quotaportal.hosts.models import GpuHost, Placement
from quotaportal.infra import wakeups
from quotaportal.quotas import services
from quotaportal.quotas.models import Event, Job, JobAttempt, OutputChunk, SchedulerRun
from quotaportal.tick import requests as ticks
from quotaportal.tick import run as tick
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue

pytestmark = pytest.mark.django_db(transaction=True)


def local_host(admin, gpus: int, names: list[str]):
    """A LOCAL queue whose one host "gpu-1" has `gpus` GPUs, these jobs submitted in order
    and ticked once: the queue, and the host's agent token."""
    env, queue = build_queue(admin, unit="gpu1", capacity=gpus, backend="LOCAL")
    add_share(admin, queue, "a", "vision", gpus, "LEND", unit="gpu1")
    raw = host_services.create_agent_token(admin, env, "gpu-1")
    token = host_services.token_for(raw)
    token.raw_key = raw  # for a test that speaks to the API as the host's agent
    host_services.register_host(token, name="gpu-1", capacity_unit="gpu1", gpus=list(range(gpus)))
    for name in names:
        services.submit_job(
            admin, job_queue=queue, quota_share="a", capacity_unit="gpu1", name=name
        )
    run_tick(queue.pk)
    return queue, token


@pytest.fixture
def one_slot(people, settings, monkeypatch):
    """A LOCAL queue with one GPU, a job running on it and one waiting; the ticks that
    changes enqueue are recorded instead of sent to a broker."""
    settings.QP_HOST_TIMEOUT = 60
    settings.QP_IMMEDIATE_TICKS = True
    enqueued = []
    monkeypatch.setattr(ticks, "enqueue_tick", enqueued.append)
    monkeypatch.setattr(tick, "_slow_inline", {})
    queue, token = local_host(people.admin, 1, ["first", "second"])
    first, second = (Job.objects.get(job_queue=queue, name=name) for name in ("first", "second"))
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
    assert Job.objects.get(pk=second.pk).status == "STARTING"  # the answer hands it over
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

    monkeypatch.setattr(tick, "_tick_queue", broken)
    batch = host_services.report_many(token, "gpu-1", exit_of(placement))
    assert batch.errors == [None, None]
    assert batch.work is None
    assert Job.objects.filter(job_queue=queue, status="SUCCEEDED").count() == 1
    assert enqueued == [queue.pk], "the change still gets its tick, from a worker"
    assert Job.objects.get(pk=second.pk).status == "RUNNABLE"


def test_a_slow_inline_tick_sends_the_next_ones_to_the_workers(one_slot, people, monkeypatch):
    token, queue, placement, second, enqueued = one_slot
    monkeypatch.setattr(tick, "INLINE_TICK_BUDGET_SECONDS", 0.0)  # every tick is too slow
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
    # Retried, (first in line) started again by the batch's own tick, and handed to its host
    # by the batch's answer.
    assert (first.status, first.attempt_count, first.attempts.count()) == ("STARTING", 1, 2)


def test_a_batchs_events_keep_the_order_of_what_happened(one_slot):
    """Its starts' and exits' events are stored together, yet a failure recorded on its own
    in between still comes after the start that preceded it."""
    token, queue, placement, _, _ = one_slot
    first = Job.objects.get(job_queue=queue, name="first")
    Job.objects.filter(pk=first.pk).update(retry_attempts=2)
    host_services.report_many(token, "gpu-1", exit_of(placement, code=3))
    kinds = list(Event.objects.filter(job=first).order_by("id").values_list("kind", flat=True))
    assert kinds == [
        "submitted",
        "dispatched",
        "starting",
        "started",  # the batch's start...
        "retried",  # ...then its failed exit, recorded on its own
        "dispatched",  # the batch's tick starts it again
        "starting",  # and its answer hands it to the host
    ]


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


@pytest.fixture
def four_running(people, settings):
    """A LOCAL host of four GPUs running four jobs (by name, their placements), more
    waiting; its agent's token."""
    settings.QP_HOST_TIMEOUT = 60
    names = ["whole", "short", "silent", "sent", "next-1", "next-2", "next-3", "next-4"]
    _, token = local_host(people.admin, 4, names)
    placements = {
        Job.objects.get(pk=p["job_id"]).name: p["placement"]
        for p in host_services.heartbeat(token, "gpu-1", [])["placements"]
    }
    assert set(placements) == {"whole", "short", "silent", "sent"}
    return token, placements


def test_a_batch_of_exits_marks_each_ranks_output_final_where_it_ends(four_running):
    """The exits' final marks are stored together, each as the shipper's last chunk would
    have: after what was stored; not over a chunk still on its way; never twice."""
    token, placements = four_running
    ship = partial(host_services.ship_output, token, "gpu-1")
    ship(placements["whole"], 0, b"hello", False)
    ship(placements["short"], 0, b"abc", False)  # ends at 10: the rest is on its way
    ship(placements["sent"], 0, b"done\n", True)  # its last chunk came first
    ends = {"whole": 5, "short": 10, "silent": 0, "sent": 5}
    batch = host_services.report_many(
        token,
        "gpu-1",
        [
            {
                "placement": placements[name],
                "event": "exited",
                "exit_code": 0,
                "output_ends_at": end,
            }
            for name, end in ends.items()
        ],
    )
    assert batch.errors == [None] * 4
    stored = {
        name: list(
            OutputChunk.objects.filter(attempt__job__name=name)
            .order_by("offset")
            .values_list("offset", "length", "final")
        )
        for name in ends
    }
    assert stored == {
        "whole": [(0, 5, False), (5, 0, True)],
        "short": [(0, 3, False)],
        "silent": [(0, 0, True)],
        "sent": [(0, 5, True)],
    }
    exited = Placement.objects.get(pk=placements["silent"]).exited_at
    assert OutputChunk.objects.get(attempt__job__name="silent").received_at == exited


class Recording(Agent):
    """An agent that records what it would reconcile to instead of starting processes."""

    def reconcile(self, desired):
        self.reconciled = [spec["placement"] for spec in desired]


def spec(placement):
    return {"placement": placement, "job_id": f"job-{placement}", "gpu_indices": [0], "hold": False}


def quiet(agent_class, tmp_path):
    """An agent of `agent_class` that talks to no server: its answers are handed to it."""
    return agent_class(
        client=None, name="gpu-1", capacity_unit="gpu1", gpus=[0, 1], work_dir=tmp_path, address=""
    )


@pytest.fixture
def agent(tmp_path):
    return quiet(Recording, tmp_path)


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


def test_an_event_is_dated_at_the_reports_arrival_less_its_age(one_slot):
    token, queue, placement, _, _ = one_slot
    dispatched = timezone.now() - timedelta(seconds=10)  # long enough ago not to bound these
    JobAttempt.objects.filter(placements=placement).update(started_at=dispatched)
    before = timezone.now()
    host_services.report_many(
        token,
        "gpu-1",
        [
            {"placement": placement, "event": "started", "age": 0.05},
            {"placement": placement, "event": "exited", "exit_code": 0, "age": 0.02},
        ],
    )
    after = timezone.now()
    ran = Placement.objects.get(pk=placement)
    late = timedelta(milliseconds=50)
    assert before - late <= ran.started_at <= after - late
    assert ran.exited_at - ran.started_at == timedelta(milliseconds=30)
    job = Job.objects.get(job_queue=queue, name="first")
    assert (job.started_at, job.stopped_at) == (ran.started_at, ran.exited_at)
    assert job.events.get(kind="succeeded").time == ran.exited_at


@pytest.mark.parametrize("batched", [True, False])
def test_the_arrival_is_taken_before_the_server_authenticates_and_parses_the_report(
    one_slot, monkeypatch, batched
):
    """The time a request spends in the server before its report is read (authentication,
    parsing) is the server's, not the job's: a clock that jumps while the token is checked
    shows which moment dates the event."""
    token, _, placement, _, _ = one_slot
    arrival = timezone.now() + timedelta(hours=1)  # after the dispatch, so it alone dates it
    clock = [arrival]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    checked = AgentTokenAuthentication.authenticate

    def slow_check(self, request):
        clock[0] += timedelta(seconds=10)
        return checked(self, request)

    monkeypatch.setattr(AgentTokenAuthentication, "authenticate", slow_check)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {token.raw_key}")
    start = {"placement": placement, "event": "started", "age": 0.5}
    if batched:
        answer = client.post(
            "/api/v1/agent/reports/", {"name": "gpu-1", "reports": [start]}, format="json"
        )
    else:
        answer = client.post("/api/v1/agent/report/", {"name": "gpu-1", **start}, format="json")
    assert answer.status_code == 200, answer.content
    assert Placement.objects.get(pk=placement).started_at == arrival - timedelta(seconds=0.5)


def test_an_age_reaching_back_before_the_dispatch_is_dated_at_the_dispatch(one_slot):
    token, queue, placement, _, _ = one_slot
    host_services.report(token, "gpu-1", placement=placement, event="started", age=3600.0)
    host_services.report(
        token, "gpu-1", placement=placement, event="exited", exit_code=0, age=3600.0
    )
    ran = Placement.objects.select_related("attempt").get(pk=placement)
    assert ran.started_at == ran.attempt.started_at, "never before its dispatch"
    assert ran.exited_at == ran.started_at, "never before its start"


def test_a_negative_or_huge_age_is_refused_with_a_message(one_slot, people):
    token, _, placement, _, _ = one_slot
    client = APIClient()
    raw = host_services.create_agent_token(people.admin, token.environment, "gpu-2")
    client.credentials(HTTP_AUTHORIZATION=f"Agent {raw}")
    for age in (-1, 10**9):
        item = {"placement": placement, "event": "started", "age": age}
        answer = client.post(
            "/api/v1/agent/reports/", {"name": "gpu-1", "reports": [item]}, format="json"
        )
        assert answer.status_code == 400
        assert "age" in answer.json()["reports"]["0"], "names the report and its field"


def test_the_agent_sends_each_reports_age_since_its_event():
    now = time.monotonic()
    sent = aged([(now - 0.5, {"event": "started"}), (now - 10**8, {"event": "exited"})])
    assert 0.5 <= sent[0]["age"] < 5
    assert sent[0]["event"] == "started"
    assert sent[1]["age"] == MAX_AGE, "capped at what the server accepts"


def test_a_start_is_never_dated_before_the_exit_that_freed_its_gpus(one_slot):
    """A preemptor is placed while its victim still holds the GPUs and starts once the
    victim has exited; a start report whose age reaches back past that exit is dated at it."""
    token, queue, victim, second, _ = one_slot
    batch = host_services.report_many(token, "gpu-1", exit_of(victim))
    successor = batch.work["placements"][0]["placement"]
    freed = Placement.objects.get(pk=victim).exited_at
    # As if dispatched before the victim's exit, the way a preemptor is.
    JobAttempt.objects.filter(placements=successor).update(started_at=freed - timedelta(seconds=9))
    host_services.report_many(
        token, "gpu-1", [{"placement": successor, "event": "started", "age": 5.0}]
    )
    assert Placement.objects.get(pk=successor).started_at == freed
    assert Job.objects.get(pk=second.pk).started_at == freed


@pytest.mark.postgresql
def test_a_waiting_heartbeat_does_not_repeat_the_work_a_reports_answer_just_gave(one_slot, people):
    from tests.hosts.builders import Waiting

    token, queue, victim, second, _ = one_slot
    version = host_services.heartbeat(token, "gpu-1", [victim])["version"]
    waiting = Waiting(token, "gpu-1", version)
    batch = host_services.report_many(token, "gpu-1", exit_of(victim))
    assert batch.work["placements"], "the answer started the next job"
    assert waiting.result(within=1.0) is None, "the agent knows already: no second answer"
    services.terminate_job(people.admin, Job.objects.get(pk=second.pk), "not needed")
    answer = waiting.result(within=10)
    assert answer is not None, "a later change still wakes it"
    assert answer["placements"] == []


def test_an_older_answer_cannot_revive_what_a_newer_one_ended(agent):
    agent.take({"placements": [spec(7), spec(9)], "horizon": 9})
    agent.take({"placements": [spec(7)], "horizon": 10})  # 9 preempted before it started
    agent.take({"placements": [spec(7), spec(9)], "horizon": 9})  # read before that
    assert agent.reconciled == [7]


def test_a_placement_only_an_older_answer_lists_is_not_started(agent):
    """Placed and ended between two answers: the newer one covered it and left it out."""
    agent.take({"placements": [spec(7)], "horizon": 7})
    agent.take({"placements": [spec(7)], "horizon": 12})
    agent.take({"placements": [spec(7), spec(9)], "horizon": 9})
    assert agent.reconciled == [7]


class Starting(Agent):
    """An agent that records the placements it would start instead of starting processes."""

    def start(self, placement, spec):
        self.started = [*getattr(self, "started", []), placement]


def held(placement):
    return {**spec(placement), "hold": True}


@pytest.fixture
def starting(tmp_path):
    return quiet(Starting, tmp_path)


def test_a_held_retry_starts_once_a_later_answer_frees_it(starting):
    """Found by the soak: a retry held back while its earlier attempt still stopped on
    another host was left out of answers covering it, so once freed it was never started."""
    starting.take({"placements": [held(9)], "horizon": 9})
    assert getattr(starting, "started", []) == [], "held: its earlier attempt still runs"
    starting.take({"placements": [spec(9)], "horizon": 9})
    assert starting.started == [9]


def test_an_older_answer_cannot_hold_back_what_a_newer_one_freed(starting):
    starting.take({"placements": [spec(9)], "horizon": 9})
    starting.take({"placements": [held(9)], "horizon": 9})  # read before the earlier exit
    assert [spec["hold"] for spec in starting.desired] == [False]


def test_a_held_placement_a_newer_answer_leaves_out_has_ended(starting):
    starting.take({"placements": [held(9)], "horizon": 9})
    starting.take({"placements": [], "horizon": 10})  # its job was terminated meanwhile
    starting.take({"placements": [spec(9)], "horizon": 9})  # read before that
    assert getattr(starting, "started", []) == []


def test_a_new_placement_in_any_answer_is_started(agent):
    agent.take({"placements": [spec(7)], "horizon": 7})
    agent.take({"placements": [spec(7), spec(11)], "horizon": 11})
    assert agent.reconciled == [7, 11]


def test_a_batch_whose_tick_places_work_only_on_its_own_host_wakes_no_heartbeat(one_slot):
    """The answer carries that work; a waiting heartbeat woken for it would only read that."""
    token, queue, placement, second, _ = one_slot
    env_id = queue.service_environment_id
    before = wakeups.generation(env_id)
    batch = host_services.report_many(token, "gpu-1", exit_of(placement))
    assert [p["job_id"] for p in batch.work["placements"]] == [str(second.pk)]
    assert wakeups.generation(env_id) == before


def test_a_batch_whose_tick_places_work_on_another_host_wakes_the_heartbeats(one_slot, people):
    token, queue, placement, second, _ = one_slot
    other = host_services.token_for(
        host_services.create_agent_token(people.admin, queue.service_environment, "gpu-2")
    )
    host_services.register_host(other, name="gpu-2", capacity_unit="gpu1", gpus=[0])
    host_services.set_host_state(people.admin, GpuHost.objects.get(name="gpu-1"), "DRAINING")
    env_id = queue.service_environment_id
    before = wakeups.generation(env_id)
    host_services.report_many(token, "gpu-1", exit_of(placement))
    assert Placement.objects.get(attempt__job=second).host.name == "gpu-2"
    assert wakeups.generation(env_id) > before, "gpu-2's agent must hear of it at once"


@pytest.fixture
def two_hosts(people, settings, monkeypatch):
    """A LOCAL queue on two one-GPU hosts; gpu-2 drained while a one-GPU job starts on gpu-1,
    then READY again, with a two-GPU job waiting behind the first."""
    settings.QP_HOST_TIMEOUT = 60
    settings.QP_IMMEDIATE_TICKS = True
    monkeypatch.setattr(ticks, "enqueue_tick", lambda queue_id: None)
    monkeypatch.setattr(tick, "_slow_inline", {})
    env, queue = build_queue(people.admin, unit="gpu1", capacity=2, backend="LOCAL")
    add_share(people.admin, queue, "a", "vision", 2, "LEND", unit="gpu1")
    tokens = {}
    for name in ("gpu-1", "gpu-2"):
        tokens[name] = host_services.token_for(
            host_services.create_agent_token(people.admin, env, name)
        )
        host_services.register_host(tokens[name], name=name, capacity_unit="gpu1", gpus=[0])
    host_services.set_host_state(people.admin, GpuHost.objects.get(name="gpu-2"), "DRAINING")

    def submit(name, quantity):
        return services.submit_job(
            people.admin,
            job_queue=queue,
            quota_share="a",
            capacity_unit="gpu1",
            name=name,
            quantity=quantity,
        )

    submit("first", 1)
    run_tick(queue.pk)
    (running,) = host_services.heartbeat(tokens["gpu-1"], "gpu-1", [])["placements"]
    wide = submit("wide", 2)
    host_services.set_host_state(people.admin, GpuHost.objects.get(name="gpu-2"), "READY")
    return env, tokens, running["placement"], wide


def test_a_batch_whose_tick_splits_a_job_across_its_host_and_another_wakes_the_heartbeats(
    two_hosts,
):
    """One rank here is in the answer; the other host's agent must hear of its rank too."""
    env, tokens, first, wide = two_hosts
    before = wakeups.generation(env.pk)
    batch = host_services.report_many(tokens["gpu-1"], "gpu-1", exit_of(first))
    assert [(p["job_id"], p["world_size"]) for p in batch.work["placements"]] == [(str(wide.pk), 2)]
    hosts = Placement.objects.filter(attempt__job=wide).values_list("host__name", flat=True)
    assert sorted(hosts) == ["gpu-1", "gpu-2"]
    assert wakeups.generation(env.pk) > before, "gpu-2's agent must hear of its rank at once"


def test_a_job_whose_ranks_span_hosts_succeeds_when_its_last_rank_exits(two_hosts):
    env, tokens, first, wide = two_hosts
    host_services.report_many(tokens["gpu-1"], "gpu-1", exit_of(first))
    ranks = {
        p.host.name: p.pk
        for p in Placement.objects.filter(attempt__job=wide).select_related("host")
    }
    host_services.report_many(tokens["gpu-1"], "gpu-1", exit_of(ranks["gpu-1"]))
    assert Job.objects.get(pk=wide.pk).status == "RUNNING", "its rank on gpu-2 still runs"
    host_services.report_many(tokens["gpu-2"], "gpu-2", exit_of(ranks["gpu-2"]))
    assert Job.objects.get(pk=wide.pk).status == "SUCCEEDED"


@pytest.mark.postgresql
def test_a_batch_and_the_tick_it_brings_make_a_fixed_number_of_queries(
    one_slot, django_assert_max_num_queries
):
    """Every freed GPU pays for this: the reports apply in bulk, the tick plans only."""
    token, queue, placement, second, _ = one_slot
    with django_assert_max_num_queries(BATCH_QUERIES):
        batch = host_services.report_many(token, "gpu-1", exit_of(placement))
    assert [p["job_id"] for p in batch.work["placements"]] == [str(second.pk)]


@pytest.mark.postgresql
def test_exits_with_their_outputs_ends_cost_the_same_statements_however_many(
    four_running, django_assert_max_num_queries
):
    """An agent's exits carry where each output ends: their final marks are three statements
    for the batch (its attempts locked, each rank's newest chunk read, the marks inserted)."""
    token, placements = four_running
    exits = [
        {"placement": placement, "event": "exited", "exit_code": 0, "output_ends_at": 0}
        for placement in placements.values()
    ]
    with django_assert_max_num_queries(BATCH_QUERIES + 3):
        batch = host_services.report_many(token, "gpu-1", exits)
    assert len(batch.work["placements"]) == 4, "the four freed GPUs each got the next job"
    assert OutputChunk.objects.filter(final=True).count() == 4


# The answer's handing the next job to its host (STARTING, with its event) is one of them; a
# tick that starts one both raises the queue's version and writes its memo (TickMemo). Each
# job state change is its UPDATE … RETURNING, then its attempts' and events' inserts (every
# insert counted, COPY too; the reports' events, a start's and an exit's, are one insert,
# and the tick learns whether any job is PENDING with the queue's row); the placements and
# their attempts' host, and the tick's record and its counters, are two statements each: one
# implementation for both databases.
BATCH_QUERIES = 36


def test_a_batchs_tick_leaves_time_driven_state_to_the_workers_ticks(one_slot, people):
    """It plans what the reports changed; a silent host is the beat's tick's to find."""
    token, queue, placement, _, _ = one_slot
    other = host_services.token_for(
        host_services.create_agent_token(people.admin, queue.service_environment, "gpu-2")
    )
    host_services.register_host(other, name="gpu-2", capacity_unit="gpu1", gpus=[0])
    long_ago = timezone.now() - timedelta(hours=1)
    GpuHost.objects.filter(name="gpu-2").update(last_heartbeat=long_ago)
    host_services.report_many(token, "gpu-1", exit_of(placement))
    assert GpuHost.objects.get(name="gpu-2").state == "READY"
    run_tick(queue.pk)
    assert GpuHost.objects.get(name="gpu-2").state == "LOST"
