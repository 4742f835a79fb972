"""A real Slurm for the SLURM backend's tests (started once per session), and a SLURM
environment of the portal on it: AWS's walkthrough shares on three instances of one GPU."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from quotaportal.quotas import services
from quotaportal.slurm.services import config
from tests.builders import add_share
from tests.slurm.builders import GPU_TYPE, GRACE, Cluster, Portal, slurm_cluster


@pytest.fixture(scope="session")
def slurm():
    if not slurm_cluster.installed():
        if os.environ.get("QP_REQUIRE_SLURM"):
            pytest.fail("slurm-wlm and munge are not installed, and QP_REQUIRE_SLURM is set")
        pytest.skip("slurm-wlm and munge are not installed (apt-get install slurm-wlm munge)")
    # Under /tmp and open to all: jobs may run as other accounts, which read their scripts
    # in slurmd's spool (pytest's own folders are its user's alone).
    root = Path(tempfile.mkdtemp(prefix="qp-slurm-cluster-", dir="/tmp"))
    root.chmod(0o755)
    cluster = Cluster(root)
    try:
        cluster.start()
    except Exception:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def cluster(slurm):
    """The session's Slurm, emptied of jobs after the test; its nodes taking jobs."""
    if "slurmctld" not in slurm.processes:
        slurm.start_controller()
    slurm.wait_for_nodes()
    yield slurm
    if "slurmctld" not in slurm.processes:
        slurm.start_controller()
    slurm.cancel_all()
    slurm.run("scontrol", "update", "PartitionName=gpu", "MaxNodes=UNLIMITED")
    for node in ("n1", "n2"):
        slurm.resume(node)


@pytest.fixture
def work_dir():
    """Where the jobs write their output: a folder any account may write to (a job may run
    as another account than the portal's), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="qp-slurm-", dir="/tmp"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def portal(people, cluster, work_dir):
    """SLURM environment "hpc": 3 instances of a100 (one GPU each), AWS's walkthrough shares
    (QS1 LEND_AND_BORROW 200 % with in-share preemption, QS2 LEND, QS3 RESERVE, one each)."""
    admin = people.admin
    for team in ("qs1", "qs2", "qs3"):
        services.create_team(admin, name=team)
    services.create_capacity_unit(admin, name=GPU_TYPE)
    env = services.create_service_environment(
        admin, name="hpc", backend="SLURM", capacity_limits={GPU_TYPE: 3}
    )
    config.configure_cluster(
        admin, env, slurm_conf=str(cluster.conf), work_dir=str(work_dir), pending_timeout_seconds=30
    )
    config.set_unit(admin, env, GPU_TYPE, partition="gpu", gpu_type=GPU_TYPE)
    policy = services.create_scheduling_policy(admin, name="fifo")
    queue = services.create_job_queue(
        admin,
        name="gpu-queue",
        scheduling_policy=policy,
        service_environment=env,
        preemption_grace_seconds=GRACE,
    )
    add_share(
        admin,
        queue,
        "QS1",
        "qs1",
        1,
        "LEND_AND_BORROW",
        unit=GPU_TYPE,
        borrow_limit=200,
        in_share_preemption=True,
    )
    add_share(admin, queue, "QS2", "qs2", 1, "LEND", unit=GPU_TYPE)
    add_share(admin, queue, "QS3", "qs3", 1, "RESERVE", unit=GPU_TYPE)
    return Portal(env, queue, admin)
