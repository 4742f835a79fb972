#!/usr/bin/env python3
"""Trivial 1-GPU jobs end to end on the production shape, beside Slurm on this machine.

    .venv/bin/python scripts/bench_e2e.py [--jobs 400] [--clients 8] [--gpus 8] [--json]

Starts gunicorn (2 threaded workers), a Celery worker and beat, and one quotaportal-agent
with --simulate GPUS on a fresh PostgreSQL database `quotaportal_bench` (Redis database 12),
one LOCAL queue. C client threads submit N jobs running `true` through the REST API (the
batch endpoint unless --no-batch); the clock runs from the first submit until every job has
SUCCEEDED. Prints jobs/s and where each
job's time goes (submit to dispatch, dispatch to agent start, run, and per GPU slot the gap
from one job's exit to the next one's start). With --json the last line is one JSON object;
slurm_per_s is Slurm's completions/s from the same run when Slurm answers, else null.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import slurm_anchor  # noqa: E402 - scripts/ is not a package
import stack  # noqa: E402
from cpu_budget import CpuMeter, bound_jobs_per_s  # noqa: E402

UNIT = "gpu1"
QUEUE = "bench"
HOST = "bench-host"


def configure(admin: stack.Rest, gpus: int) -> str:
    """The queue on a LOCAL environment of `gpus` instances; the agent's token."""
    limits = [{"capacity_unit": UNIT, "max_capacity": gpus}]
    for path, body in (
        ("capacity-units/", {"name": UNIT}),
        ("scheduling-policies/", {"name": "fifo"}),
        (
            "service-environments/",
            {"name": "fleet", "backend": "LOCAL", "capacity_limits": limits},
        ),
        (
            "job-queues/",
            {"name": QUEUE, "scheduling_policy": "fifo", "service_environment": "fleet"},
        ),
        (
            "quota-shares/",
            {
                "job_queue": QUEUE,
                "name": "vision",
                "team": "vision",
                "capacity_limits": limits,
                "sharing_strategy": "LEND_AND_BORROW",
            },
        ),
        ("service-environments/fleet/agent-token/", {"host_name": HOST}),
    ):
        status, answer = admin.call("POST", path, body)
        if status != 201:
            raise SystemExit(f"setting up {path} failed: {status} {answer}")
    return answer["token"]


def submit_all(url: str, token: str, jobs: int, clients: int, batch: bool) -> int:
    """Each of C clients submits its share: one request per job, or with `batch` its jobs in
    requests of up to 1,000 (POST /api/v1/jobs/batch/). The number of refused requests."""
    failures = []

    def body(n: int) -> dict:
        return {
            "job_queue": QUEUE,
            "quota_share": "vision",
            "capacity_unit": UNIT,
            "name": f"trivial-{n}",
            "command": "true",
        }

    def client(index: int) -> None:
        rest = stack.Rest(url, token)
        mine = list(range(index, jobs, clients))
        if batch:
            for start in range(0, len(mine), 1000):
                items = [body(n) for n in mine[start : start + 1000]]
                status, _ = rest.call("POST", "jobs/batch/", {"jobs": items})
                if status != 201:
                    failures.append(status)
            return
        for n in mine:
            status, _ = rest.call("POST", "jobs/", body(n))
            if status != 201:
                failures.append(status)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(failures)


def wait_for_all(database_url: str, jobs: int, timeout: float) -> int:
    """Count finished jobs straight from the database: polling the REST list would load the
    server it measures (a page of jobs rendered every poll)."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(database_url, autocommit=True) as conn:
        while True:
            done = conn.execute("SELECT count(*) FROM quotas_job WHERE status = 'SUCCEEDED'")
            done = done.fetchone()[0]
            if done >= jobs or time.monotonic() > deadline:
                return done
            time.sleep(0.05)


def breakdown(database_url: str) -> dict:
    """Where the time went, from the server's own timestamps."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        jobs = conn.execute(
            "SELECT created_at, scheduled_at, started_at, stopped_at FROM quotas_job"
        ).fetchall()
        placements = conn.execute(
            "SELECT host_id, gpu_indices, started_at, exited_at FROM hosts_placement "
            "WHERE started_at IS NOT NULL AND exited_at IS NOT NULL"
        ).fetchall()

    def ms(later, earlier) -> float:
        return (later - earlier).total_seconds() * 1000

    to_dispatch = [ms(s, c) for c, s, _, _ in jobs if s]
    to_start = [ms(st, s) for _, s, st, _ in jobs if s and st]
    running = [ms(e, st) for _, _, st, e in jobs if st and e]
    by_slot = defaultdict(list)
    for host, gpus, started, exited in placements:
        for gpu in gpus:
            by_slot[host, gpu].append((started, exited))
    gaps = []
    for runs in by_slot.values():
        runs.sort()
        gaps += [ms(nxt[0], prev[1]) for prev, nxt in zip(runs, runs[1:], strict=False)]
    p50 = stack.percentile
    return {
        "submit_to_dispatch_p50_ms": round(p50(to_dispatch, 0.5), 1),
        "dispatch_to_start_p50_ms": round(p50(to_start, 0.5), 1),
        "dispatch_to_start_p99_ms": round(p50(to_start, 0.99), 1),
        "run_p50_ms": round(p50(running, 0.5), 1),
        "turnaround_p50_ms": round(p50(gaps, 0.5), 1) if gaps else None,
        "turnaround_p90_ms": round(p50(gaps, 0.9), 1) if gaps else None,
    }


def parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument(
        "--batch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="submit through the batch endpoint (default), or one request per job",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for all")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument(
        "--keep", action="store_true", help="keep the work folder with its logs, and the database"
    )
    return parser.parse_args(argv)


def run(bench: stack.Stack, args, figures: dict) -> None:
    """Start the stack, then time the jobs from the first submit until all SUCCEEDED, and the
    CPU they cost; the figures go into `figures`."""
    bench.fresh_database()
    admin_token = bench.user_token("ada", "--admin")
    token = bench.user_token("alice", "--team", "vision")
    bench.start_services()
    bench.agent_tokens[HOST] = configure(stack.Rest(bench.url, admin_token), args.gpus)
    bench.wait_for_scheduler(admin_token, QUEUE)
    bench.start_agent(HOST, args.gpus, UNIT)
    time.sleep(2)  # registered and long-polling
    print(f"stack up at {bench.url}; {args.jobs} trivial jobs on {args.gpus} GPUs")
    meter = CpuMeter.of_stack(bench)
    began = time.perf_counter()
    meter.start()
    figures["non_2xx"] = submit_all(bench.url, token, args.jobs, args.clients, args.batch)
    done = wait_for_all(bench.env["DATABASE_URL"], args.jobs, args.timeout)
    wall = time.perf_counter() - began
    meter.stop()
    figures["succeeded"] = done
    figures["wall_s"] = round(wall, 2)
    figures["jobs_per_s"] = round(done / wall, 2)
    figures.update(breakdown(bench.env["DATABASE_URL"]))
    figures["cpu_ms_per_job"] = meter.per_job_ms(max(done, 1))
    figures["cpu_bound_per_s"] = bound_jobs_per_s(figures["cpu_ms_per_job"]["machine"])


def report(figures: dict, jobs: int) -> None:
    print(
        f"{figures['succeeded']}/{jobs} jobs SUCCEEDED in {figures['wall_s']} s: "
        f"{figures['jobs_per_s']} jobs/s. p50: submit to dispatch "
        f"{figures['submit_to_dispatch_p50_ms']} ms, dispatch to start "
        f"{figures['dispatch_to_start_p50_ms']} ms (p99 {figures['dispatch_to_start_p99_ms']}), "
        f"run {figures['run_p50_ms']} ms, exit to next start on the GPU "
        f"{figures['turnaround_p50_ms']} ms (p90 {figures['turnaround_p90_ms']})"
    )
    cpu = figures["cpu_ms_per_job"]
    parts = ", ".join(f"{part} {ms}" for part, ms in cpu.items() if part != "machine")
    print(
        f"CPU per job: {cpu['machine']} ms of the machine's ({parts}); at that, its "
        f"{os.cpu_count()} cores carry at most {figures['cpu_bound_per_s']} jobs/s"
    )


def main(argv=None) -> int:
    args = parse(argv)
    bench = stack.Stack("quotaportal_bench", prefix="qp-bench-e2e-", host_timeout=30)
    figures = {"jobs": args.jobs, "clients": args.clients, "gpus": args.gpus, "batch": args.batch}
    try:
        run(bench, args, figures)
    finally:
        bench.stop(keep_data=args.keep)
    slurm = slurm_anchor.figures(args.jobs)
    figures["slurm_per_s"] = slurm["completions_per_s"] if slurm else None
    ok = figures.get("succeeded") == args.jobs and figures.get("non_2xx") == 0
    report(figures, args.jobs)
    slurm_line = None
    if slurm:
        ratio = figures["jobs_per_s"] / slurm["completions_per_s"]
        slurm_line = (
            f"Slurm (same machine, 8 fake GPUs): {slurm['completions_per_s']} completions/s; "
            f"ratio {ratio:.1f}x"
        )
    return stack.finish(
        figures, ok, slurm_line, "not every job succeeded, or a submit was refused", args.json
    )


if __name__ == "__main__":
    sys.exit(main())
