"""Slurm's own figures on this machine, the anchor every benchmark prints beside its own
(set Slurm up with ../shared/bench/slurm_anchor.sh setup)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

SLURM_ANCHOR = (
    Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "slurm_anchor.sh"
)


def figures(jobs: int) -> dict | None:
    """Slurm's sbatch submits/s and completions/s from the same machine, when Slurm answers
    (set it up with ../shared/bench/slurm_anchor.sh setup); None otherwise."""
    if not SLURM_ANCHOR.exists() or shutil.which("squeue") is None:
        return None
    try:
        if subprocess.run(["squeue", "-h"], capture_output=True, timeout=5).returncode:
            return None
        done = subprocess.run(
            ["bash", str(SLURM_ANCHOR), "bench", str(jobs)],
            capture_output=True,
            text=True,
            timeout=1800,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"([\d.]+) submits/s, ([\d.]+) completions/s", done.stdout)
    if not found:
        return None
    return {"submits_per_s": float(found[1]), "completions_per_s": float(found[2])}


def array_seconds(size: int) -> float | None:
    """How long one `sbatch --array=0-(size-1)` takes to answer on the Slurm anchor (Slurm's
    default MaxArraySize allows 1,000 at most), when Slurm answers; None otherwise. The array
    is cancelled at once: only the submit is timed."""
    if shutil.which("sbatch") is None:
        return None
    command = [
        "sbatch",
        "--parsable",
        f"--array=0-{size - 1}",
        "--gres=gpu:1",
        "-n1",
        "-o",
        "/dev/null",
        "--hold",
        "--wrap=true",
    ]
    try:
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        took = time.perf_counter() - began
        if done.returncode:
            return None
        subprocess.run(["scancel", done.stdout.strip().split(";")[0]], timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return took
