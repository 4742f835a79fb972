"""quotaportal-agent --server URL --token TOKEN [--name NAME] [--simulate N --capacity-unit UNIT]"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import threading
from pathlib import Path

from quotaportal.hosts.agent.agent import Agent
from quotaportal.hosts.agent.client import AgentError, AuthError, Client, Unreachable
from quotaportal.hosts.agent.gpus import detect_gpus


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="quotaportal-agent", description="Run quotaportal jobs on this GPU host."
    )
    parser.add_argument("--server", required=True, help="the portal's URL, e.g. http://portal:8000")
    parser.add_argument(
        "--token", required=True, help="agent token of a LOCAL environment (admins create one)"
    )
    parser.add_argument(
        "--name", default=socket.gethostname(), help="host name (default: this machine's)"
    )
    parser.add_argument(
        "--capacity-unit", required=True, help="capacity unit this host provides, e.g. a100-80g"
    )
    parser.add_argument(
        "--simulate", type=int, metavar="N", help="pretend to have N GPUs (no NVML needed)"
    )
    parser.add_argument("--address", help="address other hosts reach this one at (default: --name)")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path("./quotaportal-agent"),
        help="job output and checkpoints",
    )
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between heartbeats")
    parser.add_argument(
        "--output-every",
        type=float,
        default=5.0,
        help="seconds between sending a running job's output tail",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.simulate is not None:
        if args.simulate < 1:
            print("error: --simulate needs at least 1 GPU", file=sys.stderr)
            return 2
        gpus = list(range(args.simulate))
    else:
        gpus, why = detect_gpus()
        if not gpus:
            print(
                f"error: no NVIDIA GPUs found ({why}). On a machine without GPUs, run with "
                "--simulate N to pretend to have N GPUs.",
                file=sys.stderr,
            )
            return 2
    args.work_dir.mkdir(parents=True, exist_ok=True)
    agent = Agent(
        Client(args.server, args.token),
        name=args.name,
        capacity_unit=args.capacity_unit,
        gpus=gpus,
        work_dir=args.work_dir.resolve(),
        address=args.address or args.name,
        interval=args.interval,
        output_every=args.output_every,
    )
    try:
        agent.register()
    except AuthError as err:
        print(
            f"error: the server refused the token ({err}). Ask an admin for a new agent token.",
            file=sys.stderr,
        )
        return 2
    except AgentError as err:
        print(f"error: registration refused: {err}", file=sys.stderr)
        return 2
    except Unreachable as err:
        print(
            f"error: cannot reach {args.server} ({err}). Check --server and that the portal runs.",
            file=sys.stderr,
        )
        return 3
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        agent.run(stop)
    except AuthError as err:
        print(f"error: the server stopped accepting the token ({err})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
