"""What the portal asks of Slurm for one attempt: sbatch's options and the batch script.

One Slurm job per attempt, submitted when the plan starts it: `--ntasks=<instances>` with
`--gpus-per-task=<type>:<gpus per unit>`, so each instance is one task (a rank) and Slurm
may place a multi-instance job across nodes. The job's comment ties it to the portal
(`qp:<environment>:<attempt>`): a Slurm job carrying it that the portal has no record of
(a submit whose record was lost in a crash) is the portal's to cancel.

The job sees none of the portal's environment (its database URL, its keys): sbatch runs with a
clean one (cli.submit); the script sets HOME and what a rank needs, as the LOCAL agent does:
QP_JOB_ID, QP_RANK, QP_WORLD_SIZE, QP_MASTER_ADDR, and AWS Batch's AWS_BATCH_JOB_ID and
attempt.
"""

from __future__ import annotations

import math
import re
import shlex

COMMENT_PREFIX = "qp"
NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def comment_for(env_id: int, attempt_id: int) -> str:
    return f"{COMMENT_PREFIX}:{env_id}:{attempt_id}"


def attempt_of(comment: str, env_id: int) -> int | None:
    """The attempt a job's comment names, when it is this environment's; None otherwise."""
    parts = comment.split(":")
    if len(parts) == 3 and parts[0] == COMMENT_PREFIX and parts[1] == str(env_id):
        return int(parts[2]) if parts[2].isdigit() else None
    return None


def account_for(run_as: str, user_map: dict, username: str) -> str:
    """The cluster account a portal user's jobs run as ("" : the portal's own)."""
    if not run_as:
        return ""
    if username in user_map:
        return str(user_map[username])
    return run_as.replace("{username}", username)


def sbatch_options(
    *,
    env_id: int,
    attempt_id: int,
    name: str,
    quantity: int,
    gpus_per_unit: int,
    partition: str,
    gpu_type: str,
    constraint: str,
    account: str,
    work_dir: str,
    time_limit_seconds: int | None,
) -> list[str]:
    gpus = f"{gpu_type}:{gpus_per_unit}" if gpu_type else str(gpus_per_unit)
    options = [
        f"--job-name=qp-{NAME_UNSAFE.sub('_', name)[:100]}",
        f"--comment={comment_for(env_id, attempt_id)}",
        f"--partition={partition}",
        f"--ntasks={quantity}",
        f"--gpus-per-task={gpus}",
        f"--chdir={work_dir}",
        f"--output={work_dir.rstrip('/')}/quotaportal-%j.out",
        "--no-requeue",
    ]
    if constraint:
        options.append(f"--constraint={constraint}")
    if account:
        options.append(f"--uid={account}")
    if time_limit_seconds:
        # Slurm stops it too, should the portal be away when its time is up.
        options.append(f"--time={max(1, math.ceil(time_limit_seconds / 60))}")
    return options


def batch_script(
    *, job_id: str, job_name: str, attempt: int, command: str, array_index: int | None = None
) -> str:
    """The batch script: the ranks' environment, then the command once per task (srun)."""
    rank = f'export QP_RANK="$SLURM_PROCID"\n{command}'
    exports = {
        "QP_JOB_ID": job_id,
        "QP_JOB_NAME": job_name,
        "QP_ATTEMPT": str(attempt),
        "AWS_BATCH_JOB_ID": job_id,
        "AWS_BATCH_JOB_ATTEMPT": str(attempt),
    }
    if array_index is not None:  # a child of a job array: its place in it
        exports["QP_ARRAY_INDEX"] = exports["AWS_BATCH_JOB_ARRAY_INDEX"] = str(array_index)
    lines = [
        "#!/bin/bash",
        f"# quotaportal job {job_id}, attempt {attempt}",
        *(f"export {key}={shlex.quote(value)}" for key, value in exports.items()),
        'export HOME="$(getent passwd "$(id -u)" | cut -d: -f6)"',
        'export QP_WORLD_SIZE="$SLURM_NTASKS"',
        'QP_MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1)"',
        'export QP_MASTER_ADDR="${QP_MASTER_ADDR:-$(hostname)}"',
        f"exec srun --kill-on-bad-exit=1 --export=ALL /bin/bash -c {shlex.quote(rank)}",
    ]
    return "\n".join(lines) + "\n"
