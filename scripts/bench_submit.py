#!/usr/bin/env python3
"""REST submit throughput on the production shape, beside Slurm's sbatch on this machine.

    .venv/bin/python scripts/bench_submit.py [--jobs 3000] [--clients 8] [--json]

Starts gunicorn (2 threaded workers), a Celery worker and beat on a fresh PostgreSQL database
`quotaportal_bench` (Redis database 12), one SIMULATED queue of 8 instances. C client threads
each submit their share of N jobs through POST /api/v1/jobs/ on a kept-alive connection, then
one client submits N more through POST /api/v1/jobs/batch/ (1,000 a request), and one array
of --array children (10,000) in one POST /api/v1/job-arrays/. Afterwards it checks that
exactly 2N + the array's jobs exist. Beside it, one `sbatch --array` of up to 1,000 (Slurm's
default MaxArraySize) is timed when Slurm answers. Prints submits/s and latency percentiles;
with --json the last line is one JSON object. Slurm's sequential sbatch rate is measured in
the same run when Slurm answers (../shared/bench/slurm_anchor.sh setup), else slurm_per_s is
null.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import slurm_anchor  # noqa: E402 - scripts/ is not a package
import stack  # noqa: E402

UNIT = "gpu1"
QUEUE = "bench"


def configure(admin: stack.Rest) -> None:
    for path, body in (
        ("capacity-units/", {"name": UNIT}),
        ("scheduling-policies/", {"name": "fifo"}),
        (
            "service-environments/",
            {
                "name": "sim",
                "backend": "SIMULATED",
                "capacity_limits": [{"capacity_unit": UNIT, "max_capacity": 8}],
            },
        ),
        (
            "job-queues/",
            {"name": QUEUE, "scheduling_policy": "fifo", "service_environment": "sim"},
        ),
        (
            "quota-shares/",
            {
                "job_queue": QUEUE,
                "name": "vision",
                "team": "vision",
                "capacity_limits": [{"capacity_unit": UNIT, "max_capacity": 8}],
                "sharing_strategy": "LEND_AND_BORROW",
            },
        ),
    ):
        status, answer = admin.call("POST", path, body)
        if status != 201:
            raise SystemExit(f"setting up {path} failed: {status} {answer}")


def job(name: str) -> dict:
    return {
        "job_queue": QUEUE,
        "quota_share": "vision",
        "capacity_unit": UNIT,
        "name": name,
        "simulated_duration_seconds": 3600,
    }


def rest_submits(url: str, token: str, jobs: int, clients: int) -> dict:
    latencies: list[float] = []
    failures: list[int] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        rest = stack.Rest(url, token)
        mine, bad = [], []
        for n in range(index, jobs, clients):
            started = time.perf_counter()
            status, _ = rest.call("POST", "jobs/", job(f"rest-{n}"))
            mine.append((time.perf_counter() - started) * 1000)
            if not 200 <= status < 300:
                bad.append(status)
        with lock:
            latencies.extend(mine)
            failures.extend(bad)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return {
        "submits_per_s": round(jobs / wall, 1),
        "p50_ms": round(stack.percentile(latencies, 0.50), 1),
        "p95_ms": round(stack.percentile(latencies, 0.95), 1),
        "p99_ms": round(stack.percentile(latencies, 0.99), 1),
        "non_2xx": len(failures),
    }


def batch_submits(url: str, token: str, jobs: int) -> float:
    rest = stack.Rest(url, token)
    began = time.perf_counter()
    for start in range(0, jobs, 1000):
        items = [job(f"batch-{n}") for n in range(start, min(jobs, start + 1000))]
        status, answer = rest.call("POST", "jobs/batch/", {"jobs": items})
        if status != 201:
            raise SystemExit(f"batch submit failed: {status} {str(answer)[:300]}")
    return round(jobs / (time.perf_counter() - began), 1)


def array_submit(url: str, token: str, size: int) -> dict:
    """One POST /api/v1/job-arrays/ of `size` children: the request's time, per child."""
    rest = stack.Rest(url, token)
    began = time.perf_counter()
    status, answer = rest.call(
        "POST", "job-arrays/", {**job("sweep"), "array_size": size, "array_max_running": 8}
    )
    took = time.perf_counter() - began
    if status != 201:
        raise SystemExit(f"array submit failed: {status} {str(answer)[:300]}")
    return {
        "array_size": size,
        "array_s": round(took, 3),
        "array_us_per_job": round(took / size * 1e6, 1),
        "array_children": sum(answer["counts"].values()),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--array", type=int, default=10_000, help="children of one array")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument("--keep", action="store_true", help="keep the logs and the database")
    args = parser.parse_args(argv)
    bench = stack.Stack("quotaportal_bench", prefix="qp-bench-submit-", host_timeout=30)
    try:
        bench.fresh_database()
        admin_token = bench.user_token("ada", "--admin")
        token = bench.user_token("alice", "--team", "vision")
        bench.start_services()
        configure(stack.Rest(bench.url, admin_token))
        bench.wait_for_scheduler(admin_token, QUEUE)
        print(f"stack up at {bench.url}; {args.jobs} REST submits from {args.clients} clients")
        figures = {"jobs": args.jobs, "clients": args.clients}
        figures.update(rest_submits(bench.url, token, args.jobs, args.clients))
        figures["batch_jobs_per_s"] = batch_submits(bench.url, token, args.jobs)
        figures.update(array_submit(bench.url, token, args.array))
        status, listed = stack.Rest(bench.url, admin_token).call("GET", f"jobs/?job_queue={QUEUE}")
        figures["jobs_in_db"] = listed.get("count") if status == 200 else None
    finally:
        bench.stop(keep_data=args.keep)
    slurm = slurm_anchor.figures(min(args.jobs, 500))
    figures["slurm_per_s"] = slurm["submits_per_s"] if slurm else None
    anchor = slurm_anchor.array_seconds(min(args.array, 1000))
    figures["slurm_array_us_per_job"] = (
        round(anchor / min(args.array, 1000) * 1e6, 1) if anchor is not None else None
    )
    expected = 2 * args.jobs + args.array
    ok = (
        figures["jobs_in_db"] == expected
        and figures["non_2xx"] == 0
        and figures["array_children"] == args.array
    )
    print(
        f"REST: {figures['submits_per_s']} submits/s at {args.clients} clients "
        f"(p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms, p99 {figures['p99_ms']} ms, "
        f"{figures['non_2xx']} non-2xx); batch: {figures['batch_jobs_per_s']} jobs/s; "
        f"{figures['jobs_in_db']} jobs in the database (expected {expected})"
    )
    per_job = 1e6 / figures["batch_jobs_per_s"]
    print(
        f"array of {args.array:,}: one request, {figures['array_s']} s, "
        f"{figures['array_us_per_job']} µs a child (batch submit: {per_job:.0f} µs a job); "
        f"sbatch --array of {min(args.array, 1000):,}: "
        + (f"{figures['slurm_array_us_per_job']} µs a child" if anchor is not None else "no Slurm")
    )
    slurm_line = None
    if slurm:
        ratio = figures["submits_per_s"] / slurm["submits_per_s"]
        slurm_line = (
            f"Slurm sbatch (sequential, same machine): {slurm['submits_per_s']} submits/s; "
            f"ratio {ratio:.2f}x"
        )
    return stack.finish(figures, ok, slurm_line, "jobs were lost, duplicated or refused", args.json)


if __name__ == "__main__":
    sys.exit(main())
