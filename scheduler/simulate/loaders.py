"""Workloads to replay: the Alibaba openb GPU trace, Kueue's scheduler-performance baseline,
and a synthetic fleet for the simulator's own speed benchmark."""

from __future__ import annotations

import csv
import math
import random
from collections import Counter
from pathlib import Path

from scheduler.model import Share, Strategy
from scheduler.simulate.workload import QueueConfig, QueueWorkload, WorkJob, Workload, WorkloadError

# -- Alibaba openb (2023) ---------------------------------------------------------------------

NODES_FILE = "openb_node_list_gpu_node.csv"
PODS_FILE = "openb_pod_list_gpuspec33.csv"
# A few hundred of the trace's pods, shipped with the code for tests and the what-if page.
SAMPLE_TRACE_DIR = Path(__file__).parent / "traces" / "alibaba-openb-sample"
# QoS class -> (share, strategy, share of each unit's GPUs as its limit, priority in the share)
QOS_SHARES = {
    "LS": ("latency-sensitive", Strategy.RESERVE, 0.5, 100),
    "Guaranteed": ("guaranteed", Strategy.LEND, 0.05, 80),
    "Burstable": ("burstable", Strategy.LEND, 0.05, 50),
    "BE": ("best-effort", Strategy.LEND_AND_BORROW, 0.4, 0),
}


def find_trace_dir(path: str | Path) -> Path:
    """The folder holding the openb CSV files: `path` itself or one folder below it."""
    root = Path(path)
    for candidate in (root, *sorted(p for p in root.glob("*") if p.is_dir())):
        if (candidate / PODS_FILE).is_file() and (candidate / NODES_FILE).is_file():
            return candidate
    raise WorkloadError(f"{path}: no {PODS_FILE} and {NODES_FILE} here or one folder below")


def alibaba_openb(path: str | Path) -> Workload:
    """One job queue replaying the trace's GPU pods.

    Each GPU model is a capacity unit of one GPU, with the cluster's GPU count as capacity. A
    pod becomes a job of num_gpu instances of the model it may use that has the most GPUs
    (any model when gpu_spec is empty; a fractional GPU counts as a whole one), submitted at
    its creation time and running from scheduled_time to deletion_time (to the end of the
    trace when it was still running). Pods without GPUs or never scheduled are left out.
    """
    folder = find_trace_dir(path)
    capacity: Counter[str] = Counter()
    with open(folder / NODES_FILE, newline="") as handle:
        for row in csv.DictReader(handle):
            capacity[row["model"]] += int(row["gpu"])
    with open(folder / PODS_FILE, newline="") as handle:
        pods = list(csv.DictReader(handle))
    trace_end = max(int(v) for p in pods for v in (p["creation_time"], p["deletion_time"]) if v)
    by_size = sorted(capacity, key=lambda m: (-capacity[m], m))
    jobs, skipped = [], Counter()
    for pod in pods:
        job = _pod_job(pod, capacity, by_size, trace_end)
        if isinstance(job, str):
            skipped[job] += 1
        else:
            jobs.append(job)
    shares = tuple(
        Share(name, {m: max(1, math.floor(capacity[m] * part)) for m in capacity}, strategy)
        for name, strategy, part, _ in sorted(set(QOS_SHARES.values()))
    )
    used = Counter(j.share for j in jobs)
    notes = (
        "Alibaba openb 2023 trace (Weng et al., USENIX ATC 2023), "
        f"{len(jobs):,} GPU pods of {len(pods):,}",
        "units: one per GPU model, capacity = the cluster's GPUs of that model: "
        + ", ".join(f"{m} {capacity[m]}" for m in by_size),
        "shares from QoS: "
        + "; ".join(
            f"{qos} -> {name} ({strategy.value}, limit {part:.0%} of each model, "
            f"{used[name]:,} jobs)"
            for qos, (name, strategy, part, _) in QOS_SHARES.items()
        ),
        "a pod runs as many whole GPUs as num_gpu, of the largest model its gpu_spec allows; "
        "left out: " + ", ".join(f"{n:,} {why}" for why, n in sorted(skipped.items())),
    )
    config = QueueConfig("openb", dict(capacity), shares)
    return Workload("alibaba-openb-2023", (QueueWorkload(config, tuple(jobs)),), notes)


def _pod_job(pod: dict, capacity: Counter, by_size: list[str], trace_end: int) -> WorkJob | str:
    """The job a pod becomes, or why it is left out."""
    gpus = int(pod["num_gpu"] or 0)
    if gpus == 0:
        return "no GPU"
    if not pod["scheduled_time"]:
        return "never scheduled"
    allowed = set(pod["gpu_spec"].split("|")) if pod["gpu_spec"] else set(capacity)
    unit = next((m for m in by_size if m in allowed), None)
    if unit is None:  # a cut of the trace may hold no node of the models it asks for
        return "no node of its GPU model"
    share, _, _, priority = QOS_SHARES[pod["qos"] if pod["qos"] in QOS_SHARES else "BE"]
    scheduled = int(pod["scheduled_time"])
    end = int(pod["deletion_time"]) if pod["deletion_time"] else trace_end
    return WorkJob(
        pod["name"],
        share,
        unit,
        gpus,
        priority,
        float(pod["creation_time"]),
        float(max(0, end - scheduled)),
    )


# -- Kueue's scheduler performance baseline ---------------------------------------------------

KUEUE_CLASSES = (
    # (name, count per share, units, seconds, priority, one every ... seconds)
    ("small", 350, 1, 0.2, 50, 0.1),
    ("medium", 100, 5, 0.5, 100, 0.5),
    ("large", 50, 20, 1.0, 200, 1.2),
)


def kueue_baseline(queues: int = 5, shares_per_queue: int = 6) -> Workload:
    """Kueue's baseline (5 cohorts of 6 ClusterQueues) as 5 job queues of 6 LEND_AND_BORROW
    shares: limit 20, borrow limit 500 %, in-share preemption, 120 units per queue."""
    workload_queues = []
    for q in range(queues):
        shares = tuple(
            Share(f"cq-{q}-{s}", {"unit": 20}, Strategy.LEND_AND_BORROW, 500, True)
            for s in range(shares_per_queue)
        )
        jobs = []
        for share in shares:
            for name, count, units, seconds, priority, every in KUEUE_CLASSES:
                for i in range(count):
                    jobs.append(
                        WorkJob(
                            f"{share.name}-{name}-{i}",
                            share.name,
                            "unit",
                            units,
                            priority,
                            round(i * every, 6),
                            seconds,
                        )
                    )
        config = QueueConfig(f"cohort-{q}", {"unit": 120}, shares)
        workload_queues.append(QueueWorkload(config, tuple(jobs)))
    notes = (
        f"Kueue scheduler-performance baseline shape: {queues} queues x {shares_per_queue} "
        "LEND_AND_BORROW shares (limit 20, borrow limit 500 %, in-share preemption), "
        "capacity 120 per queue; per share 350 small (1 unit, 0.2 s, priority 50, every 0.1 s), "
        "100 medium (5 units, 0.5 s, priority 100, every 0.5 s), "
        "50 large (20 units, 1 s, priority 200, every 1.2 s)",
    )
    return Workload("kueue-baseline", tuple(workload_queues), notes)


# -- a synthetic fleet (the simulator's speed benchmark) -------------------------------------

FLEET_UNITS = ("a100", "h100", "l4", "t4")


FLEET_SIZES, FLEET_SIZE_WEIGHTS = (1, 2, 4, 8), (70, 15, 10, 5)


def _fleet_shares(rng: random.Random, shares: int) -> list[Share]:
    """Shares of mixed strategies, each with limits on one or two GPU models."""
    strategies = (Strategy.LEND_AND_BORROW, Strategy.LEND, Strategy.RESERVE)
    share_list = []
    for i in range(shares):
        strategy = rng.choices(strategies, (4, 4, 2))[0]
        units = rng.sample(FLEET_UNITS, rng.choice((1, 1, 2)))
        limits = {u: rng.choice((2, 4, 4, 8)) for u in units}
        borrow = rng.choice((100, 200, -1)) if strategy is Strategy.LEND_AND_BORROW else -1
        share_list.append(Share(f"team-{i:04d}", limits, strategy, borrow, rng.random() < 0.5))
    return share_list


def _fleet_jobs(
    rng: random.Random, share_list: list[Share], jobs: int, rate: float, uniform_demand: bool
) -> list[WorkJob]:
    """A Poisson stream of jobs at `rate` per second, each on a share and one of its units."""
    demand = [sum(s.limits.values()) for s in share_list]
    now, work = 0.0, []
    for i in range(jobs):
        now += rng.expovariate(rate)
        if uniform_demand:
            share = share_list[rng.randrange(len(share_list))]
            unit = rng.choice(sorted(share.limits))
        else:
            share = rng.choices(share_list, demand)[0]
            unit = rng.choices(
                sorted(share.limits), [share.limits[u] for u in sorted(share.limits)]
            )[0]
        size = min(rng.choices(FLEET_SIZES, FLEET_SIZE_WEIGHTS)[0], share.limits[unit])
        duration = max(1, round(rng.lognormvariate(math.log(1200), 0.8)))
        work.append(
            WorkJob(
                f"job-{i}",
                share.name,
                unit,
                size,
                rng.choice((0, 10, 20, 50, 90)),
                float(math.floor(now)),
                float(duration),
            )
        )
    return work


def fleet(
    jobs: int = 100_000,
    shares: int = 1_000,
    load: float = 0.8,
    seed: int = 7,
    uniform_demand: bool = False,
) -> Workload:
    """One queue of `shares` shares over four GPU models, loaded to about `load` of capacity.

    Times are whole seconds, as in cluster traces: arrivals are a Poisson stream, durations
    log-normal (median 20 minutes), 1-8 instances, priorities in five levels. Each job's
    share is drawn in proportion to its limits (teams sized to their quota); with
    `uniform_demand` every share submits as often, so small shares drown in their backlogs
    and only borrowing relieves them: a stress case.
    """
    rng = random.Random(seed)
    share_list = _fleet_shares(rng, shares)
    capacity = {u: sum(s.limits.get(u, 0) for s in share_list) for u in FLEET_UNITS}
    mean_duration = math.exp(math.log(1200) + 0.8**2 / 2)
    mean_size = sum(s * w for s, w in zip(FLEET_SIZES, FLEET_SIZE_WEIGHTS, strict=True)) / sum(
        FLEET_SIZE_WEIGHTS
    )
    rate = load * sum(capacity.values()) / (mean_duration * mean_size)  # jobs per second
    work = _fleet_jobs(rng, share_list, jobs, rate, uniform_demand)
    config = QueueConfig("fleet", capacity, tuple(share_list))
    notes = (
        f"synthetic fleet: {shares:,} shares over {', '.join(FLEET_UNITS)} "
        f"(capacity {capacity}), {jobs:,} jobs at about {load:.0%} load, whole-second times, "
        + (
            "every share submitting as often" if uniform_demand else "demand in proportion to quota"
        ),
    )
    return Workload("fleet", (QueueWorkload(config, tuple(work)),), notes)
