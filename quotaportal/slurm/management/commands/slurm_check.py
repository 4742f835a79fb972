"""manage.py slurm_check ENV — what the portal sees of a SLURM environment's cluster: its
nodes, the capacity per unit it would plan with, the jobs it started and the foreign ones.
It runs the same two read-only commands a tick does, and changes nothing."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from quotaportal.quotas.models import Backend, ServiceEnvironment
from quotaportal.slurm import cli
from quotaportal.slurm.capacity import UnitMap, capacity_of, foreign_jobs
from quotaportal.slurm.models import SlurmCluster
from quotaportal.slurm.requests import attempt_of
from quotaportal.slurm.services.watching import access_of


class Command(BaseCommand):
    help = "Show what the portal sees of a SLURM environment's cluster; changes nothing."

    def add_arguments(self, parser):
        parser.add_argument("environment", help="the SLURM service environment's name")

    def handle(self, *args, environment, **options):
        env = ServiceEnvironment.objects.filter(name=environment).first()
        if env is None:
            raise CommandError(f"no service environment named {environment!r}")
        if env.backend != Backend.SLURM:
            raise CommandError(f"{environment} is {env.backend}, not SLURM")
        cluster = SlurmCluster.objects.filter(environment=env).first()
        if cluster is None:
            raise CommandError(
                f"{environment} has no Slurm cluster configured: set it on its page in the "
                "admin console"
            )
        access = access_of(cluster)
        where = f"ssh {access.ssh_user + '@' if access.ssh_user else ''}{access.ssh_host}"
        self.stdout.write(f"Slurm of {env.name}: {where if access.ssh_host else 'this machine'}")
        try:
            found = cli.poll(access)
        except cli.SlurmError as err:
            raise CommandError(f"Slurm could not be read: {err.message}") from None
        self._nodes(found)
        self._capacity(cluster, found)
        self._jobs(env, found)

    def _nodes(self, found: cli.Poll) -> None:
        self.stdout.write(f"nodes ({sum(n.usable for n in found.nodes)} take jobs):")
        for node in sorted(found.nodes, key=lambda n: n.name):
            gpus = ", ".join(f"{n} {kind or 'gpu'}" for kind, n in node.gpus.items()) or "no GPUs"
            taking = "takes jobs" if node.usable else "takes no jobs"
            reason = f" ({node.reason})" if node.reason else ""
            partitions = ",".join(sorted(node.partitions))
            self.stdout.write(
                f"  {node.name}: {node.state}{reason}, {taking}; {gpus}; partitions {partitions}"
            )

    def _capacity(self, cluster: SlurmCluster, found: cli.Poll) -> None:
        units = {
            u.capacity_unit.name: UnitMap(
                u.partition, u.gpu_type, u.constraint, u.capacity_unit.gpus_per_unit
            )
            for u in cluster.units.select_related("capacity_unit")
        }
        if not units:
            self.stdout.write("capacity: no capacity unit is mapped to a partition yet")
            return
        ours = {
            j for j, job in found.jobs.items() if attempt_of(job.comment, cluster.environment_id)
        }
        for unit, count in capacity_of(found, units, ours).items():
            where = units[unit]
            self.stdout.write(
                f"capacity {unit}: {count} instance(s) (partition {where.partition}, "
                f"GPU type {where.gpu_type or 'any'}, {where.gpus_per_unit} per instance)"
            )

    def _jobs(self, env, found: cli.Poll) -> None:
        ours = [j for j in found.jobs.values() if attempt_of(j.comment, env.pk) is not None]
        self.stdout.write(f"jobs the portal started that Slurm holds: {len(ours)}")
        for job in ours:
            self.stdout.write(f"  {job.job_id} {job.name} {job.state} {job.node_list}")
        foreign = foreign_jobs(found, {j.job_id for j in ours})
        self.stdout.write(f"foreign jobs holding GPUs (never preempted): {len(foreign)}")
        for job in foreign:
            gpus = sum(sum(kinds.values()) for kinds in job.gpus_on.values())
            self.stdout.write(
                f"  {job.job_id} {job.name} ({job.user}): {gpus} GPUs on {job.node_list}"
            )
