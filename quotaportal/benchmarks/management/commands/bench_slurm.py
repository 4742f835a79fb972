"""manage.py bench_slurm — the SLURM backend against a real Slurm, beside LOCAL.

Starts a throwaway Slurm (scripts/slurm_cluster.py: two nodes of fake A100s, as root) unless
--slurm-conf names a running one, and measures, in transactions rolled back afterwards (the
Slurm jobs it made are cancelled):

- plan -> running in Slurm: the tick that starts --starts one-GPU jobs, then squeue every
  50 ms until each shows RUNNING; per start, p50 and p90 (and the tick's own time);
- preemption decided -> the victim's GPUs free: a borrower runs, a lender's job comes, and
  from the tick that preempts, how long until the victim is gone from Slurm, for a victim
  that checkpoints on SIGTERM and exits, and for one that ignores it (scancel after the grace
  period, then Slurm's KillWait); grace period 0;
- ticks per second with --jobs jobs in the queue and --running of them running in Slurm, each
  tick one look at the cluster; and the same queue on a LOCAL environment (hosts registered,
  no agents), whose ticks look at nothing outside the database.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from quotaportal.benchmarks.rolled_back import rolled_back
from quotaportal.hosts.models import GpuHost
from quotaportal.quotas import services
from quotaportal.quotas.models import CapacityUnit, Job, Team
from quotaportal.slurm.services import config
from quotaportal.tick.run import run_tick

UNIT = "bench-a100"
CHECKPOINTS = "trap 'exit 0' TERM; sleep 3600 & wait"
IGNORES = "trap '' TERM; sleep 3600 & wait"


def _cluster_module():
    path = Path(settings.BASE_DIR) / "scripts" / "slurm_cluster.py"
    spec = importlib.util.spec_from_file_location("qp_slurm_cluster", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Command(BaseCommand):
    help = "Measure the SLURM backend against a real Slurm, beside LOCAL (rolled back)."

    def add_arguments(self, parser):
        parser.add_argument("--slurm-conf", help="a running Slurm's slurm.conf (else a throwaway)")
        parser.add_argument("--starts", type=int, default=40, help="jobs one tick starts")
        parser.add_argument("--jobs", type=int, default=1000, help="jobs waiting in the queue")
        parser.add_argument("--running", type=int, default=200, help="of them running in Slurm")
        parser.add_argument("--ticks", type=int, default=30, help="ticks timed per backend")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, slurm_conf, starts, jobs, running, ticks, json: bool, **options):
        if min(starts, jobs, running, ticks) < 1 or running > jobs:
            raise CommandError("give positive counts, and no more --running than --jobs")
        module = _cluster_module()
        cluster = None
        if not slurm_conf:
            if not module.installed():
                raise CommandError("slurm-wlm and munge are not installed (or give --slurm-conf)")
            root = Path(tempfile.mkdtemp(prefix="qp-bench-slurm-", dir="/tmp"))
            root.chmod(0o755)
            gpus = max(running, starts) // len(module.NODES) + 4
            cluster = module.Cluster(root, gpus_per_node=gpus, cpus=gpus + 8)
            self.stderr.write(f"starting a throwaway Slurm ({gpus} GPUs a node) in {root} ...")
            cluster.start()
            slurm_conf = str(cluster.conf)
        try:
            _sbatch_anchor(slurm_conf, 1)  # a cold slurmctld's first start is slower
            figures = {
                "starts": [
                    {
                        "portal": rolled_back(lambda: self._starts(slurm_conf, starts)),
                        "sbatch": _sbatch_anchor(slurm_conf, starts),
                    }
                    for _ in range(2)  # interleaved: portal, Slurm alone, portal, Slurm alone
                ],
                "preemption": rolled_back(lambda: self._preemptions(slurm_conf)),
                **rolled_back(lambda: self._both_ticks(slurm_conf, jobs, running, ticks)),
            }
        finally:
            _scancel_all(slurm_conf)
            if cluster is not None:
                cluster.stop()
        self._report(figures, json)

    # -- the measures ------------------------------------------------------------------------

    def _queue(self, backend: str, capacity: int, slurm_conf: str = "", **shares):
        tag = f"bench-{time.time_ns()}"
        CapacityUnit.objects.get_or_create(name=UNIT)
        env = services.create_service_environment(
            None, name=tag, backend=backend, capacity_limits={UNIT: capacity}
        )
        if backend == "SLURM":
            work = Path(tempfile.mkdtemp(prefix="qp-bench-out-", dir="/tmp"))
            work.chmod(0o777)
            config.configure_cluster(None, env, slurm_conf=slurm_conf, work_dir=str(work))
            config.set_unit(None, env, UNIT, partition="gpu", gpu_type="a100")
        queue = services.create_job_queue(
            None,
            name=tag,
            scheduling_policy=services.create_scheduling_policy(None, name=tag),
            service_environment=env,
            preemption_grace_seconds=0,
        )
        team = Team.objects.create(name=tag)
        for name, (limit, strategy) in (shares or {"all": (capacity, "LEND")}).items():
            services.create_share(
                None,
                job_queue=queue,
                name=name,
                team=team,
                capacity_limits={UNIT: limit},
                sharing_strategy=strategy,
            )
        return queue

    def _submit(self, queue, share: str, count: int, command: str = "sleep 3600", **fields):
        return services.submit_jobs(
            None,
            [
                {
                    "job_queue": queue,
                    "quota_share": share,
                    "capacity_unit": UNIT,
                    "name": f"j{i}",
                    "command": command,
                    **fields,
                }
                for i in range(count)
            ],
        )

    def _starts(self, slurm_conf: str, count: int) -> dict:
        queue = self._queue("SLURM", count, slurm_conf)
        run_tick(queue.pk)  # the first look: the cluster's capacity
        self._submit(queue, "all", count)
        began = time.monotonic()
        run_tick(queue.pk)
        tick_s = time.monotonic() - began
        ids = set(queue_slurm_ids(queue))
        seen: dict[str, float] = {}
        while len(seen) < len(ids) and time.monotonic() - began < 120:
            for job_id, state in squeue(slurm_conf).items():
                if job_id in ids and state == "RUNNING" and job_id not in seen:
                    seen[job_id] = time.monotonic() - began
            time.sleep(0.05)
        _scancel_all(slurm_conf)
        return {"jobs": count, "dispatch_tick_s": round(tick_s, 3), **_percentiles(seen.values())}

    def _preemptions(self, slurm_conf: str) -> dict:
        return {
            "checkpointing_s": self._one_preemption(slurm_conf, CHECKPOINTS),
            "ignoring_s": self._one_preemption(slurm_conf, IGNORES),
        }

    def _one_preemption(self, slurm_conf: str, victim_command: str) -> float | None:
        queue = self._queue(
            "SLURM", 2, slurm_conf, borrower=(1, "LEND_AND_BORROW"), lender=(1, "LEND")
        )
        run_tick(queue.pk)
        self._submit(queue, "borrower", 2, victim_command)
        deadline = time.monotonic() + 60
        while set(squeue(slurm_conf).values()) != {"RUNNING"} and time.monotonic() < deadline:
            run_tick(queue.pk)
            time.sleep(0.1)
        victims = set(queue_slurm_ids(queue))
        self._submit(queue, "lender", 1)
        began = time.monotonic()
        run_tick(queue.pk)  # the preemption is decided, and the signal sent
        while time.monotonic() - began < 60:
            alive = squeue(slurm_conf)
            if len(victims & set(alive)) < len(victims):
                gone = time.monotonic() - began
                _scancel_all(slurm_conf)
                return round(gone, 2)
            run_tick(queue.pk)
            time.sleep(0.05)
        _scancel_all(slurm_conf)
        return None

    def _both_ticks(self, slurm_conf: str, jobs: int, running: int, ticks: int) -> dict:
        """The SLURM queue's ticks and the LOCAL queue's, interleaved, on the same machine
        with the same Slurm jobs running (once their start's load has passed)."""
        slurm = self._queue("SLURM", running, slurm_conf)
        run_tick(slurm.pk)
        self._submit_many(slurm, jobs)
        deadline = time.monotonic() + 300
        while Job.objects.filter(job_queue=slurm, status="RUNNING").count() < running:
            if time.monotonic() > deadline:
                raise CommandError("the jobs never all ran in Slurm")
            run_tick(slurm.pk)
            time.sleep(0.2)
        _settle()
        local = self._local_queue(jobs, running)
        halves = [
            (name, self._timed_ticks(queue, max(1, ticks // 2)))
            for _ in range(2)
            for name, queue in (("ticks", slurm), ("local_ticks", local))
        ]
        return {
            name: _merged([t for n, t in halves if n == name]) for name in ("ticks", "local_ticks")
        }

    def _local_queue(self, jobs: int, running: int):
        queue = self._queue("LOCAL", running)
        unit = CapacityUnit.objects.get(name=UNIT)
        later = timezone.now() + timedelta(days=1)  # no host goes quiet meanwhile
        GpuHost.objects.bulk_create(
            GpuHost(
                name=f"{queue.name}-h{i}",
                service_environment=queue.service_environment,
                capacity_unit=unit,
                slots=4,
                gpu_indices=[[g] for g in range(4)],
                last_heartbeat=later,
            )
            for i in range(-(-running // 4))
        )
        self._submit_many(queue, jobs)
        run_tick(queue.pk)
        return queue

    def _submit_many(self, queue, jobs: int) -> None:
        for start in range(0, jobs, 1000):
            self._submit(queue, "all", min(1000, jobs - start))

    def _timed_ticks(self, queue, ticks: int) -> dict:
        durations = []
        for _ in range(ticks):
            began = time.perf_counter()
            with transaction.atomic():
                run_tick(queue.pk)
            durations.append(time.perf_counter() - began)
        return {"durations": durations}

    def _report(self, figures: dict, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps(figures))
            return
        preemption = figures["preemption"]
        for pair in figures["starts"]:
            portal, anchor = pair["portal"], pair["sbatch"]
            self.stdout.write(
                f"plan -> running in Slurm, {portal['jobs']} one-GPU jobs started by one tick "
                f"({portal['dispatch_tick_s']} s): p50 {portal['p50_s']} s, p90 "
                f"{portal['p90_s']} s; straight through sbatch ({anchor['submit_s']} s to "
                f"submit): p50 {anchor['p50_s']} s, p90 {anchor['p90_s']} s"
            )
        self.stdout.write(
            f"preemption decided -> victim's GPUs free (grace 0): checkpointing victim "
            f"{preemption['checkpointing_s']} s, one ignoring SIGTERM {preemption['ignoring_s']} s"
        )
        for name, label in (("ticks", "SLURM"), ("local_ticks", "LOCAL")):
            t = figures[name]
            self.stdout.write(
                f"{label}: {t['ticks_per_s']} ticks/s sustained (p50 {t['tick_ms_p50']} ms a tick)"
            )


def _merged(parts: list[dict]) -> dict:
    durations = [d for part in parts for d in part["durations"]]
    return {
        "ticks": len(durations),
        "ticks_per_s": round(len(durations) / sum(durations), 1),
        "tick_ms_p50": round(statistics.median(durations) * 1000, 1),
    }


def _settle(seconds: float = 90) -> None:
    """Wait until the machine's load falls back (a few hundred jobs' processes starting load
    a small machine for a while), so the ticks are timed on a quiet machine."""
    deadline = time.monotonic() + seconds
    while os.getloadavg()[0] > 2 * (os.cpu_count() or 1) and time.monotonic() < deadline:
        time.sleep(1)


def _percentiles(times) -> dict:
    times = sorted(times)
    if not times:
        return {"started": 0, "p50_s": None, "p90_s": None}
    return {
        "started": len(times),
        "p50_s": round(statistics.median(times), 2),
        "p90_s": round(times[int(0.9 * (len(times) - 1))], 2),
    }


def _sbatch_anchor(slurm_conf: str, count: int) -> dict:
    """The same jobs submitted straight with sbatch, no portal: Slurm's own submit -> running,
    the floor of the portal's plan -> running on this cluster."""
    env = {"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"}
    began = time.monotonic()
    ids = {
        subprocess.run(
            ["sbatch", "--parsable", "--gres=gpu:a100:1", "-o", "/dev/null", "--wrap=sleep 3600"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for _ in range(count)
    }
    submit_s = time.monotonic() - began
    seen: dict[str, float] = {}
    while len(seen) < len(ids) and time.monotonic() - began < 120:
        for job_id, state in squeue(slurm_conf).items():
            if job_id in ids and state == "RUNNING" and job_id not in seen:
                seen[job_id] = time.monotonic() - began
        time.sleep(0.05)
    _scancel_all(slurm_conf)
    return {"submit_s": round(submit_s, 3), **_percentiles(seen.values())}


def queue_slurm_ids(queue) -> list[str]:
    from quotaportal.slurm.models import SlurmJob

    return list(
        SlurmJob.objects.filter(attempt__job__job_queue=queue, ended_at__isnull=True).values_list(
            "slurm_job_id", flat=True
        )
    )


def squeue(slurm_conf: str) -> dict[str, str]:
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %T"],
        env={"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def _scancel_all(slurm_conf: str) -> None:
    env = {"SLURM_CONF": slurm_conf, "PATH": "/usr/bin:/bin"}
    subprocess.run(["scancel", "-u", "root"], env=env, capture_output=True)
    deadline = time.monotonic() + 30
    while squeue(slurm_conf) and time.monotonic() < deadline:
        time.sleep(0.2)
