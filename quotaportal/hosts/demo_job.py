"""A demo training job: prints progress, checkpoints, and stops cleanly on SIGTERM.

python -m quotaportal.hosts.demo_job --seconds 30 [--exit-code N]
It resumes from $QP_CHECKPOINT_DIR/step if a previous attempt left one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo_job")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--exit-code", type=int, default=0)
    args = parser.parse_args(argv)
    checkpoint = Path(os.environ.get("QP_CHECKPOINT_DIR", ".")) / "step"
    step = int(checkpoint.read_text()) if checkpoint.exists() else 0
    stopping = False

    def on_term(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    rank, gpus = os.environ.get("QP_RANK", "0"), os.environ.get("CUDA_VISIBLE_DEVICES", "")
    print(f"rank {rank} on GPUs [{gpus}] starting at step {step}", flush=True)
    steps = max(1, int(args.seconds))
    while step < steps:
        if stopping:
            checkpoint.write_text(str(step))
            print(f"SIGTERM: checkpoint written at step {step}", flush=True)
            return 143
        time.sleep(args.seconds / steps)
        step += 1
        print(f"step {step}/{steps}", flush=True)
    print("done", flush=True)
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
