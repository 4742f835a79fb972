"""Every scenario of the contract (and the project's own) through the SLURM backend on a real
Slurm: the same outcomes as the pure scheduler, with every start a real sbatch and every
preemption a real signal and scancel. Each scenario's units are the cluster's a100 GPUs (its
capacities fit in the eight)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from quotaportal.quotas import services
from quotaportal.slurm.models import SlurmJob
from quotaportal.slurm.services import config, watching
from quotaportal.whatif.replays.scenario_world import DbWorld, at
from scheduler.scenarios import PureWorld, load, play
from tests.builders import every_scenario_file
from tests.slurm.builders import GPU_TYPE, GPUS_PER_NODE, NODES

pytestmark = pytest.mark.django_db(transaction=True)


class SlurmWorld(DbWorld):
    """The scenario's steps on a SLURM environment. Its queue gives no grace period, and after
    each tick the world waits, in real time, until Slurm has stopped every victim: on the
    scenario's clock, as on the pure scheduler's, a victim is back in line at the next step."""

    def __init__(self, scenario, **options):
        super().__init__(scenario, **options)
        services.update_job_queue(None, self.queue, preemption_grace_seconds=0)

    def tick(self, now):
        super().tick(now)
        stopping = SlurmJob.objects.filter(
            environment=self.env, ended_at__isnull=True, attempt__stopped_at__isnull=False
        )
        deadline = time.monotonic() + 60
        looks = 0
        while stopping.exists():
            assert time.monotonic() < deadline, "Slurm did not stop the victims"
            time.sleep(0.2)
            looks += 1  # each look a millisecond later on the scenario's clock
            watching.look(self.queue, at(now) + timedelta(milliseconds=looks))


def fits(path) -> bool:
    scenario = load(path)
    reserved = sum(step.body["instances"] for step in scenario.steps if step.kind == "reserve")
    most = sum(scenario.capacity.values()) + reserved
    return most <= GPUS_PER_NODE * len(NODES)


@pytest.mark.parametrize(
    "path", [p for p in every_scenario_file() if fits(p)], ids=lambda p: p.stem
)
def test_a_scenario_through_slurm_agrees_with_the_pure_scheduler(path, cluster, work_dir):
    scenario = load(path)

    def on_the_cluster(env):
        config.configure_cluster(
            None,
            env,
            slurm_conf=str(cluster.conf),
            work_dir=str(work_dir),
            pending_timeout_seconds=86400,  # scenario time leaps; nothing may be handed back
        )
        for unit in scenario.capacity:
            config.set_unit(None, env, unit, partition="gpu", gpu_type=GPU_TYPE)

    world = SlurmWorld(scenario, backend="SLURM", prepare=on_the_cluster, command="sleep 900")
    through_slurm = [r.line() for r in play(scenario, world)]
    pure = [r.line() for r in play(scenario, PureWorld.of(scenario))]
    assert [line for line in through_slurm if not line.startswith("PASS")] == []
    assert through_slurm == pure
