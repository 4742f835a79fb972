"""A SLURM environment through the interfaces: the console configures it (refusing bad values
beside their fields), the fleet and environment pages say what the portal sees of the
cluster, the job page and REST name each attempt's Slurm job (its output only to its team),
and `manage.py slurm_check` prints what the portal sees without changing anything."""

from __future__ import annotations

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from quotaportal.quotas import services
from quotaportal.quotas.models import Job
from quotaportal.slurm.models import SlurmCluster, SlurmJob, SlurmState, SlurmUnit

pytestmark = pytest.mark.django_db(transaction=True)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_configures_the_cluster_and_bad_values_are_refused_beside_them(portal, people):
    page = f"/manage/environments/{portal.env.pk}/slurm/"
    admin = signed_in(people.admin)
    form = {
        "form": "cluster",
        "cluster-ssh_host": "login1.example.org",
        "cluster-ssh_user": "svc-quota",
        "cluster-ssh_key": "/etc/quotaportal/id_ed25519",
        "cluster-slurm_conf": "",
        "cluster-run_as": "{username}",
        "cluster-user_map": "alice=asmith, bob=bjones",
        "cluster-work_dir": "/scratch/quotaportal",
        "cluster-pending_timeout_seconds": "300",
        "cluster-checkpoint_signal": "USR1",
    }
    assert admin.post(page, form).status_code == 302
    cluster = SlurmCluster.objects.get(environment=portal.env)
    assert (cluster.ssh_host, cluster.user_map["alice"], cluster.checkpoint_signal) == (
        "login1.example.org",
        "asmith",
        "USR1",
    )
    for field, bad, says in (
        ("cluster-ssh_host", "login1; rm -rf /", "host name"),
        ("cluster-work_dir", "relative/path", "absolute path"),
        ("cluster-user_map", "alice", "portal-user=cluster-account"),
        ("cluster-run_as", "$(id)", "account name"),
    ):
        refused = admin.post(page, {**form, field: bad})
        assert refused.status_code == 400, field
        assert says in refused.content.decode(), field
    assert SlurmCluster.objects.get(environment=portal.env).ssh_host == "login1.example.org"
    unit = admin.post(
        page,
        {"form": "unit-a100", "unit-a100-partition": "gpu-long", "unit-a100-gpu_type": "a100"},
    )
    assert unit.status_code == 302
    assert SlurmUnit.objects.get(cluster=cluster).partition == "gpu-long"
    bad_unit = admin.post(page, {"form": "unit-a100", "unit-a100-partition": "gpu long"})
    assert bad_unit.status_code == 400
    assert signed_in(people.alice).get(page).status_code == 403
    assert signed_in(people.alice).post(page, form).status_code == 403


def test_the_pages_say_what_the_portal_sees_of_the_cluster(portal, cluster, people):
    cluster.drain("n2", "fan broken")
    foreign = cluster.foreign_job(gpus=2)
    portal.ticks_until(
        lambda: SlurmState.objects.get(environment=portal.env).foreign, what="a look"
    )
    admin = signed_in(people.admin)
    fleet = admin.get("/fleet/").content.decode()
    card = fleet[fleet.index('data-environment="hpc"') :].split("</section>")[0]
    assert "Slurm: " in card
    assert "healthy" in card
    assert "1 of 2 nodes take jobs: n2 drained (fan broken)" in card
    assert f"{foreign} (root, 2 GPUs)" in card
    env_page = admin.get(f"/manage/environments/{portal.env.pk}/").content.decode()
    assert "the usable Slurm nodes" in env_page
    settings_page = admin.get(f"/manage/environments/{portal.env.pk}/slurm/").content.decode()
    assert 'data-testid="slurm-nodes"' in settings_page
    assert "Capacity the planner uses: 2 a100" in settings_page


def test_the_job_page_and_rest_name_the_slurm_job_and_show_output_to_its_team(
    portal, cluster, people
):
    sam, _ = services.create_user("sam", teams=["qs1"])
    job = services.submit_job(
        sam,
        job_queue=portal.queue,
        quota_share="QS1",
        capacity_unit="a100",
        name="hello",
        command="echo secret-output",
    )
    portal.ticks_until(lambda: Job.objects.get(pk=job.pk).status == "SUCCEEDED", what="an end")
    slurm_job = SlurmJob.objects.get(attempt__job=job)
    page = signed_in(sam).get(f"/jobs/{job.pk}/").content.decode()
    assert f"Slurm job {slurm_job.slurm_job_id} (COMPLETED) on n1" in page
    assert slurm_job.output_path in page
    assert "secret-output" in page
    mine = APIClient()
    mine.force_authenticate(sam)
    shown = mine.get(f"/api/v1/jobs/{job.pk}/").json()["attempts"][0]["slurm"]
    assert shown["job_id"] == slurm_job.slurm_job_id
    assert (shown["state"], shown["exit_code"]) == ("COMPLETED", 0)
    assert "secret-output" in shown["output_tail"]
    other = APIClient()
    other.force_authenticate(people.bob)  # not on QS1's team: the job, not its output
    seen = other.get(f"/api/v1/jobs/{job.pk}/").json()["attempts"][0]["slurm"]
    assert seen["job_id"] == slurm_job.slurm_job_id
    assert seen["output_tail"] is None
    admin = APIClient()
    admin.force_authenticate(people.admin)
    assert (
        "secret-output"
        in admin.get(f"/api/v1/jobs/{job.pk}/").json()["attempts"][0]["slurm"]["output_tail"]
    )


def test_slurm_check_prints_what_the_portal_sees_and_changes_nothing(portal, cluster):
    foreign = cluster.foreign_job(gpus=1)
    deadline = time.monotonic() + 30
    while cluster.jobs().get(foreign) != "RUNNING":
        assert time.monotonic() < deadline, "the foreign job never ran"
        time.sleep(0.3)
    out = StringIO()
    call_command("slurm_check", "hpc", stdout=out)
    text = out.getvalue()
    assert "nodes (2 take jobs):" in text
    assert "n1: idle" in text or "n1: mixed" in text
    assert "capacity a100: 7 instance(s) (partition gpu, GPU type a100, 1 per instance)" in text
    assert "foreign jobs holding GPUs (never preempted): 1" in text
    assert not SlurmState.objects.filter(environment=portal.env).exists()
    with pytest.raises(CommandError, match="no service environment named 'nope'"):
        call_command("slurm_check", "nope")
