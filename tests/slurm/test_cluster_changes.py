"""What Slurm does by itself reaches the portal: a job that exits 3 fails with that code, a
foreign job takes capacity (and is never preempted), a drained node shrinks capacity, a job
Slurm cannot place in time waits in the portal again, and sbatch runs as the job's owner."""

from __future__ import annotations

import pytest

from quotaportal.jobs.output import read_output
from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.slurm.models import SlurmCluster, SlurmJob, SlurmState
from quotaportal.slurm.services import config
from quotaportal.tick.run import run_tick
from tests.slurm.builders import slurm_states

pytestmark = pytest.mark.django_db(transaction=True)


def submit(portal, name, share="QS1", command="sleep 600", **fields):
    return services.submit_job(
        portal.admin,
        job_queue=portal.queue,
        quota_share=share,
        capacity_unit="a100",
        name=name,
        command=command,
        **fields,
    )


def capacity(portal) -> int:
    return SlurmState.objects.get(environment=portal.env).capacity["a100"]


def test_a_job_that_exits_3_fails_with_its_code_and_its_output(portal, cluster):
    job = submit(portal, "three", command="echo about to fail; exit 3")
    portal.ticks_until(
        lambda: Job.objects.get(pk=job.pk).status == "FAILED", what="the job to fail"
    )
    job.refresh_from_db()
    assert job.status_reason == "Exited with code 3"
    attempt = job.attempts.get()
    assert attempt.exit_code == 3
    slurm_job = SlurmJob.objects.get(attempt=attempt)
    assert (slurm_job.state, slurm_job.exit_code) == ("FAILED", 3)
    assert slurm_job.output_path.endswith(f"quotaportal-{slurm_job.slurm_job_id}.out")
    assert "about to fail" in slurm_job.output_tail


def test_a_jobs_whole_output_is_kept_not_only_its_tail(portal, cluster):
    # (Larger outputs at full speed trip srun's own I/O forwarding in the test cluster, where
    # every slurmd shares one machine: Slurm's words then end the file.)
    job = submit(portal, "chatty", command="seq 1 20000")
    portal.ticks_until(
        lambda: read_output(Job.objects.get(pk=job.pk), offset=10**9).complete,
        what="the whole output to be stored",
    )
    found, offset = bytearray(), 0
    while read := read_output(Job.objects.get(pk=job.pk), offset=offset).data:
        found += read
        offset += len(read)
    expected = b"".join(b"%d\n" % i for i in range(1, 20001))
    at = next((i for i, (a, b) in enumerate(zip(found, expected, strict=False)) if a != b), None)
    assert bytes(found) == expected, bytes(found[at - 100 : at + 300]) if at else len(found)


def test_a_successful_job_gets_the_ranks_environment_and_none_of_the_portals(
    portal, cluster, monkeypatch
):
    monkeypatch.setenv("QP_SECRET_KEY", "do-not-leak")  # in the portal's own environment
    command = 'echo "rank=$QP_RANK of $QP_WORLD_SIZE job=$QP_JOB_ID key=${QP_SECRET_KEY:-none}"'
    job = submit(portal, "env", command=command, quantity=2)
    portal.ticks_until(
        lambda: Job.objects.get(pk=job.pk).status == "SUCCEEDED", what="the job to succeed"
    )
    tail = SlurmJob.objects.get(attempt__job=job).output_tail
    assert f"rank=0 of 2 job={job.pk} key=none" in tail
    assert f"rank=1 of 2 job={job.pk} key=none" in tail


def test_a_foreign_job_takes_capacity_and_is_never_preempted(portal, cluster):
    portal.tick()
    before = capacity(portal)
    assert before == 8  # two nodes of four a100 (the environment's 3 bound the plan)
    foreign = cluster.foreign_job(gpus=4)
    portal.ticks_until(lambda: capacity(portal) == 4, what="the foreign job to be counted")
    state = SlurmState.objects.get(environment=portal.env)
    assert [j["job_id"] for j in state.foreign] == [foreign]
    for index in range(5):
        submit(portal, f"j{index}")
    # QS1 runs its own instance and borrows QS2's; QS3 reserves the third.
    portal.ticks_until(
        lambda: sum(1 for s in slurm_states(portal, cluster).values() if s == "RUNNING") == 2,
        what="the portal's jobs to run",
    )
    assert cluster.jobs()[foreign] == "RUNNING", "the portal never touches a foreign job"


def test_a_drained_node_shrinks_capacity_and_the_planner_reacts(portal, cluster):
    services.update_service_environment(portal.admin, portal.env, capacity_limits={"a100": 8})
    portal.tick()
    assert capacity(portal) == 8
    cluster.drain("n2", "fan broken")
    portal.ticks_until(lambda: capacity(portal) == 4, what="the drained node to leave")
    for index in range(6):
        submit(portal, f"d{index}", share="QS1")
    portal.ticks_until(
        lambda: Job.objects.filter(job_queue=portal.queue, status="RUNNING").count() == 3,
        what="QS1 to run what it may",
    )
    running = Job.objects.filter(job_queue=portal.queue, status__in=("STARTING", "RUNNING"))
    # QS1 may use 3 (its 1 and 200 % borrowed): all on the one node left.
    assert running.count() == 3
    assert {SlurmJob.objects.get(attempt__job=j).node_list for j in running} == {"n1"}
    from quotaportal.quotas.backends import backend_for

    notes = backend_for(portal.env).health_notes(portal.env)
    assert "1 of 2 nodes take jobs: n2 drained (fan broken)" in notes[0]


def test_a_job_slurm_cannot_place_in_time_waits_in_the_portal_again(portal, cluster):
    """A partition limit the portal does not model holds the job PENDING in Slurm: past the
    cluster's pending timeout it is cancelled there and waits in the portal again, without
    using an attempt; once Slurm can run it, it does."""
    SlurmCluster.objects.filter(environment=portal.env).update(pending_timeout_seconds=10)
    cluster.run("scontrol", "update", "PartitionName=gpu", "MaxNodes=0")
    job = submit(portal, "unlucky")
    portal.ticks_until(lambda: Job.objects.get(pk=job.pk).status == "STARTING", what="a start")
    first = SlurmJob.objects.get(attempt__job=job).slurm_job_id
    # Handed back, then started again at once (nothing else wants the capacity): as a new
    # Slurm job, the first one cancelled, and no attempt used.
    portal.ticks_until(
        lambda: SlurmJob.objects.filter(attempt__job=job).exclude(slurm_job_id=first).exists(),
        seconds=30,
        what="the pending job to be handed back and started again",
    )
    job.refresh_from_db()
    assert (job.attempt_count, job.attempts.count()) == (0, 1)
    assert first not in cluster.jobs(), "cancelled in Slurm"
    assert not SlurmJob.objects.filter(slurm_job_id=first).exists()
    cluster.run("scontrol", "update", "PartitionName=gpu", "MaxNodes=UNLIMITED")
    portal.ticks_until(lambda: Job.objects.get(pk=job.pk).status == "RUNNING", what="a run")


def test_jobs_run_as_their_owners_account(portal, cluster, people):
    config.configure_cluster(
        portal.admin, portal.env, run_as="{username}", user_map={"alice": "nobody"}
    )
    services.create_team(portal.admin, name="vision-team")
    job = submit(portal, "whoami", command="echo user=$(id -un)")
    # The admin's portal name is no account on this machine: Slurm refuses, the job fails.
    portal.ticks_until(lambda: Job.objects.get(pk=job.pk).status == "FAILED", what="a refusal")
    assert Job.objects.get(pk=job.pk).status_reason.startswith("Slurm refused the job:")
    alice = people.alice
    from quotaportal.quotas.models import Membership, Team

    Membership.objects.create(team=Team.objects.get(name="qs1"), user=alice)
    mine = services.submit_job(
        alice,
        job_queue=portal.queue,
        quota_share="QS1",
        capacity_unit="a100",
        name="mine",
        command="echo user=$(id -un)",
    )
    portal.ticks_until(lambda: Job.objects.get(pk=mine.pk).status == "SUCCEEDED", what="a run")
    assert "user=nobody" in SlurmJob.objects.get(attempt__job=mine).output_tail
    run_tick(portal.queue.pk)


def test_an_attempt_past_its_duration_is_cancelled_in_slurm(portal, cluster):
    job = submit(portal, "slow", attempt_duration_seconds=2)
    portal.ticks_until(lambda: Job.objects.get(pk=job.pk).status == "RUNNING", what="a run")
    portal.ticks_until(
        lambda: Job.objects.get(pk=job.pk).status == "FAILED", seconds=20, what="the timeout"
    )
    assert Job.objects.get(pk=job.pk).status_reason == "Attempt duration exceeded"
    slurm_job = SlurmJob.objects.get(attempt__job=job)
    portal.ticks_until(
        lambda: slurm_job.slurm_job_id not in cluster.jobs(), what="Slurm to stop it"
    )
    assert SlurmJob.objects.get(pk=slurm_job.pk).cancelled_at is not None
