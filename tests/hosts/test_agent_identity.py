"""Agent tokens are agent identities: one host each, revocable, and a report about a job is
accepted only from the host that holds it. Through the agent protocol, as a thief would."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import AgentToken, GpuHost, Placement
from quotaportal.infra import wakeups
from quotaportal.quotas.models import Job
from quotaportal.tick.run import run_tick
from tests.builders import add_share, build_queue, submit

pytestmark = pytest.mark.django_db


class Agents:
    def __init__(self, people):
        self.admin = people.admin
        self.env, self.queue = build_queue(people.admin, capacity=8, backend="LOCAL")
        add_share(people.admin, self.queue, "vision", "vision", 8, "LEND_AND_BORROW")
        self.queue.service_environment = self.env

    def token(self, host_name: str = "") -> str:
        return host_services.create_agent_token(self.admin, self.env, host_name)

    @staticmethod
    def call(token: str, path: str, body: dict):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Agent {token}")
        return client.post(f"/api/v1/agent/{path}/", body, format="json")

    def register(self, token: str, name: str, gpus: int = 2):
        body = {"name": name, "capacity_unit": "a100", "gpus": list(range(gpus))}
        return self.call(token, "register", body)


@pytest.fixture
def agents(people):
    return Agents(people)


@pytest.fixture
def api():
    def as_user(user) -> APIClient:
        client = APIClient()
        client.force_authenticate(user)
        return client

    return as_user


def dispatch(people, agents, name="job", **fields):
    job = submit(people.alice, agents, share="vision", name=name, **fields)
    run_tick(agents.queue.id)
    return Job.objects.get(pk=job.pk)


def test_a_token_binds_to_the_first_host_it_registers_and_speaks_for_no_other(agents):
    token = agents.token()
    assert agents.register(token, "gpu-1").status_code == 200
    refused = agents.register(token, "fake-256", gpus=256)
    assert refused.status_code == 403
    assert "belongs to host gpu-1" in refused.json()["detail"]
    assert not GpuHost.objects.filter(name="fake-256").exists()


def test_a_stolen_token_cannot_take_over_or_shrink_another_host(agents):
    mine, thief = agents.token("gpu-1"), agents.token()
    assert agents.register(mine, "gpu-1", gpus=4).status_code == 200
    taken = agents.register(thief, "gpu-1", gpus=0)
    assert taken.status_code == 403
    assert "belongs to another agent token" in taken.json()["detail"]
    assert GpuHost.objects.get(name="gpu-1").slots == 4, "capacity unchanged"
    assert agents.call(thief, "heartbeat", {"name": "gpu-1"}).status_code == 403


def test_a_report_about_a_job_is_accepted_only_from_the_host_that_holds_it(people, agents):
    victim_token, thief_token = agents.token("gpu-1"), agents.token("gpu-2")
    agents.register(victim_token, "gpu-1", gpus=1)
    agents.register(thief_token, "gpu-2", gpus=1)
    job = dispatch(people, agents, name="theirs")
    placement = Placement.objects.get(attempt__job=job)
    holder = placement.host.name
    other = "gpu-2" if holder == "gpu-1" else "gpu-1"
    other_token = thief_token if other == "gpu-2" else victim_token
    report = {"placement": placement.pk, "event": "exited", "exit_code": 0}
    # The other host's own token, in its own name: the placement is not on that host.
    assert agents.call(other_token, "report", {**report, "name": other}).status_code == 400
    # The other host's token in the holder's name: that host is not the token's.
    assert agents.call(other_token, "report", {**report, "name": holder}).status_code == 403
    job.refresh_from_db()
    assert job.status == "SCHEDULED", "no thief could end another team's job"


def test_revoking_a_token_cuts_off_its_host_at_once_and_fails_its_jobs_over(people, agents):
    token = agents.token("gpu-1")
    agents.register(token, "gpu-1", gpus=2)
    job = dispatch(people, agents, retry_attempts=2)
    assert job.status == "SCHEDULED"
    record = host_services.token_for(token)
    out = StringIO()
    call_command("agent_tokens", "revoke", record.prefix, stdout=out)
    assert "gpu-1 now LOST" in out.getvalue()
    assert GpuHost.objects.get(name="gpu-1").state == "LOST"
    job.refresh_from_db()
    assert (job.status, job.status_reason) == ("RUNNABLE", "Host lost")
    refused = agents.call(token, "heartbeat", {"name": "gpu-1"})
    assert refused.status_code == 401
    # The name is free again for a new identity, which an admin hands out.
    fresh = agents.token("gpu-1")
    assert agents.register(fresh, "gpu-1").status_code == 200


def test_revoke_reads_an_all_digit_prefix_as_a_prefix_and_falls_back_to_ids(people, agents):
    digits = host_services.token_for(agents.token("gpu-1"))
    other = host_services.token_for(agents.token("gpu-2"))
    # One hex prefix in ~12 is all digits (the CI run that found this drew '030899').
    AgentToken.objects.filter(id=digits.id).update(prefix="030899")
    AgentToken.objects.filter(id=other.id).update(prefix="abcdef")
    call_command("agent_tokens", "revoke", "030899", stdout=StringIO())
    call_command("agent_tokens", "revoke", str(other.id), stdout=StringIO())
    assert {t.revoked for t in AgentToken.objects.filter(id__in=[digits.id, other.id])} == {True}
    with pytest.raises(CommandError, match="no token match '999999'"):
        call_command("agent_tokens", "revoke", "999999", stdout=StringIO())
    AgentToken.objects.filter(id=digits.id).update(prefix=f"{other.id}0000")
    with pytest.raises(CommandError, match="2 tokens match"):
        call_command("agent_tokens", "revoke", str(other.id), stdout=StringIO())


def test_admins_list_and_revoke_tokens_through_the_rest_api(people, agents, api):
    token = agents.token("gpu-9")
    agents.register(token, "gpu-9")
    listed = api(people.admin).get("/api/v1/agent-tokens/").json()["results"]
    entry = next(t for t in listed if t["host_name"] == "gpu-9")
    assert entry["hosts"] == ["gpu-9"]
    assert token not in str(listed), "the secret is never shown"
    assert api(people.alice).get("/api/v1/agent-tokens/").status_code == 403
    url = f"/api/v1/agent-tokens/{entry['id']}/revoke/"
    assert api(people.alice).post(url).status_code == 403
    assert api(people.admin).post(url).json()["revoked"] is True
    assert GpuHost.objects.get(name="gpu-9").state == "LOST"


def test_lost_hosts_can_be_deleted_and_released_hosts_taken_by_a_new_token(people, agents, api):
    agents.register(agents.token("gpu-1"), "gpu-1")
    admin = api(people.admin)
    ready = admin.delete("/api/v1/hosts/gpu-1/")
    assert ready.status_code == 409
    assert "only a LOST host" in ready.json()["detail"]
    assert admin.post("/api/v1/hosts/gpu-1/release/").json()["state"] == "LOST"
    assert agents.register(agents.token(), "gpu-1").status_code == 200, "released name is free"
    host_services.release_host(people.admin, GpuHost.objects.get(name="gpu-1"))
    assert api(people.alice).delete("/api/v1/hosts/gpu-1/").status_code == 403
    assert admin.delete("/api/v1/hosts/gpu-1/").status_code == 204
    assert not GpuHost.objects.filter(name="gpu-1").exists()


@pytest.mark.parametrize("name", ["bad\nname", "tab\there", "-starts-with-dash", "x" * 129, ""])
def test_host_names_must_be_plain(agents, name):
    response = agents.register(agents.token(), name)
    assert response.status_code == 400
    assert "name" in response.json()


def test_a_retry_is_held_back_while_its_preempted_attempt_still_runs_elsewhere(
    people, agents, django_capture_on_commit_callbacks
):
    tokens = {name: agents.token(name) for name in ("gpu-1", "gpu-2")}
    agents.register(tokens["gpu-1"], "gpu-1", gpus=1)
    job = dispatch(people, agents, retry_attempts=3)
    first = Placement.objects.get(attempt__job=job)
    agents.call(
        tokens["gpu-1"], "report", {"name": "gpu-1", "placement": first.pk, "event": "started"}
    )
    # The job's attempt ends on the server (a failure it will retry) while its process on
    # gpu-1 is still stopping; the retry lands on gpu-2.
    from quotaportal.jobs.transitions import end_attempt

    end_attempt(job, succeeded=False, status_reason="Exited with code 1")
    host_services.set_host_state(people.admin, GpuHost.objects.get(name="gpu-1"), "DRAINING")
    agents.register(tokens["gpu-2"], "gpu-2", gpus=1)
    run_tick(agents.queue.id)
    retry = Placement.objects.filter(attempt__job=job, attempt__number=2).get()
    assert retry.host.name == "gpu-2"

    def wanted_on_gpu_2():
        answer = agents.call(tokens["gpu-2"], "heartbeat", {"name": "gpu-2"}).json()
        return [(p["placement"], p["hold"]) for p in answer["placements"]], answer["version"]

    held, held_version = wanted_on_gpu_2()
    # Listed, not left out: an agent takes a placement a covering answer leaves out as ended.
    assert held == [(retry.pk, True)], "held back while attempt 1 still runs on gpu-1"
    env_id = agents.queue.service_environment_id
    before = wakeups.generation(env_id)
    exited = {"name": "gpu-1", "placement": first.pk, "event": "exited", "exit_code": 143}
    with django_capture_on_commit_callbacks(execute=True):
        agents.call(tokens["gpu-1"], "report", exited)
    assert wakeups.generation(env_id) > before, "gpu-2's waiting heartbeat hears of it at once"
    freed, freed_version = wanted_on_gpu_2()
    assert freed == [(retry.pk, False)]
    assert freed_version != held_version, "a long-poll that knows the held answer returns"


def test_the_agent_needs_a_token_from_the_environment_or_a_file(tmp_path, capsys, monkeypatch):
    from quotaportal.hosts.agent.__main__ import main

    monkeypatch.delenv("QP_AGENT_TOKEN", raising=False)
    base = ["--server", "http://127.0.0.1:9", "--capacity-unit", "a100", "--simulate", "1"]
    assert main(base) == 2
    assert "set QP_AGENT_TOKEN or pass --token-file" in capsys.readouterr().err
    assert main([*base, "--token-file", str(tmp_path / "missing")]) == 2
    assert "cannot read --token-file" in capsys.readouterr().err
    assert main([*base, "--run-as", "no-such-user-here"]) == 2
    assert main([*base, "--token", "secret"]) == 2
    assert "--token is not accepted" in capsys.readouterr().err


def test_a_rank_ended_before_its_agent_started_it_is_closed_by_the_agents_word(people, agents):
    """Found by the soak: a rank preempted before it started gets no exit report, and held
    back its job's retries for ever. The heartbeat's list of what runs closes it."""
    tokens = {name: agents.token(name) for name in ("gpu-1", "gpu-2")}
    agents.register(tokens["gpu-1"], "gpu-1", gpus=1)
    job = dispatch(people, agents, retry_attempts=3)
    never_started = Placement.objects.get(attempt__job=job)
    from quotaportal.jobs.transitions import end_attempt

    end_attempt(job, succeeded=False, status_reason="Exited with code 1")
    host_services.set_host_state(people.admin, GpuHost.objects.get(name="gpu-1"), "DRAINING")
    agents.register(tokens["gpu-2"], "gpu-2", gpus=1)
    run_tick(agents.queue.id)
    retry = Placement.objects.get(attempt__job=job, attempt__number=2)

    def beat(host, running):
        body = {"name": host, "running": running}
        answer = agents.call(tokens[host], "heartbeat", body).json()
        return [p["placement"] for p in answer["placements"] if not p["hold"]]  # to start

    assert beat("gpu-2", []) == []
    assert beat("gpu-1", [never_started.pk]) == [], "it says it runs it: still open"
    assert beat("gpu-2", []) == []
    assert beat("gpu-1", []) == []
    never_started.refresh_from_db()
    assert never_started.exited_at is not None
    assert beat("gpu-2", []) == [retry.pk]


def test_batched_reports_apply_in_order_and_a_stale_one_spoils_no_other(people, agents):
    token = agents.token("gpu-1")
    agents.register(token, "gpu-1")
    job = dispatch(people, agents)
    placement = Placement.objects.get(attempt__job=job).pk
    answer = agents.call(
        token,
        "reports",
        {
            "name": "gpu-1",
            "reports": [
                {"placement": placement, "event": "started"},
                {"placement": 999_999, "event": "started"},
                {"placement": placement, "event": "exited", "exit_code": 0, "output_tail": "ok"},
            ],
        },
    )
    assert answer.status_code == 200, answer.content
    results = answer.json()["results"]
    assert [r["ok"] for r in results] == [True, False, True]
    assert "is not on host gpu-1" in results[1]["detail"]
    job.refresh_from_db()
    assert job.status == "SUCCEEDED"
    other = agents.token("gpu-2")
    agents.register(other, "gpu-2")
    stolen = agents.call(
        other,
        "reports",
        {"name": "gpu-1", "reports": [{"placement": placement, "event": "started"}]},
    )
    assert stolen.status_code == 403, "a token reports only for its own host"


def test_an_agent_run_as_root_refuses_to_run_jobs_as_root_unless_told(capsys, monkeypatch):
    from quotaportal.hosts.agent import __main__ as agent_cli

    monkeypatch.setenv("QP_AGENT_TOKEN", "t")
    monkeypatch.setattr(agent_cli.os, "geteuid", lambda: 0)
    base = ["--server", "http://127.0.0.1:9", "--capacity-unit", "a100", "--simulate", "1"]
    assert agent_cli.main(base) == 2
    err = capsys.readouterr().err
    assert "Pass --run-as USER" in err
    assert "--allow-root-jobs" in err
    args = agent_cli.parse([*base, "--allow-root-jobs"])
    assert agent_cli.root_jobs_error(args) == ""
    monkeypatch.setattr(agent_cli.os, "geteuid", lambda: 1000)
    assert agent_cli.root_jobs_error(agent_cli.parse(base)) == ""


def test_an_agent_refuses_limits_it_cannot_enforce_or_read(capsys, monkeypatch, tmp_path):
    from quotaportal.hosts.agent import __main__ as agent_cli
    from quotaportal.hosts.agent import containment

    monkeypatch.setenv("QP_AGENT_TOKEN", "t")
    base = [
        "--server", "http://127.0.0.1:9", "--capacity-unit", "a100", "--simulate", "1",
        "--allow-root-jobs", "--work-dir", str(tmp_path),
    ]  # fmt: skip
    with pytest.raises(SystemExit) as bad:
        agent_cli.parse([*base, "--mem-per-gpu", "lots"])
    assert bad.value.code == 2
    assert "'lots' is not a size: write e.g. 16G" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        agent_cli.parse([*base, "--cpus-per-gpu", "-2"])
    assert "is not a number of CPUs" in capsys.readouterr().err
    monkeypatch.setattr(containment, "MOUNTS", tmp_path / "no-mounts")  # a host without cgroups
    assert agent_cli.main([*base, "--mem-per-gpu", "16G"]) == 2
    assert "16 GiB of memory per GPU need cgroups" in capsys.readouterr().err


def test_a_heartbeat_answer_is_bounded_by_the_hosts_slots(people, agents):
    """An answer lists at most one rank per slot, each with a command of at most 64 KiB: a
    host's answer is at most slots × ANSWER_BYTES_PER_SLOT, however much its teams submit."""
    from quotaportal.hosts.services.agents import ANSWER_BYTES_PER_SLOT
    from quotaportal.jobs.fields import MAX_COMMAND_BYTES

    token = agents.token("gpu-1")
    assert agents.register(token, "gpu-1", gpus=2).status_code == 200
    command = "echo " + "\x01" * (MAX_COMMAND_BYTES - 5)  # each is 6 bytes of JSON (\u0001)
    for number in range(5):
        dispatch(people, agents, name=f"huge-{number}", command=command)
    answer = agents.call(token, "heartbeat", {"name": "gpu-1"})
    assert answer.status_code == 200
    assert len(answer.json()["placements"]) == 2, "one rank per slot; the rest wait"
    assert len(answer.content) <= 2 * ANSWER_BYTES_PER_SLOT
    too_many = agents.register(agents.token("gpu-2"), "gpu-2", gpus=257)
    assert too_many.status_code == 400
    assert "a host has at most 256 GPUs" in str(too_many.json())
