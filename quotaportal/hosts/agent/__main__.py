"""quotaportal-agent --server URL --capacity-unit UNIT [--token-file FILE] [--name NAME] ...

The token comes from QP_AGENT_TOKEN or --token-file, never from the command line, which every
process on the host can read (/proc/PID/cmdline).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path

from quotaportal.hosts.agent.agent import Agent
from quotaportal.hosts.agent.client import AgentError, AuthError, Client, Unreachable
from quotaportal.hosts.agent.containment import ContainmentError, Limits, parse_size
from quotaportal.hosts.agent.gpus import detect_gpus
from quotaportal.hosts.agent.runner import ENV_ALLOWLIST, JobUser
from quotaportal.hosts.agent.shipper import DEFAULT_SPACE

TOKEN_VARIABLE = "QP_AGENT_TOKEN"


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="quotaportal-agent", description="Run quotaportal jobs on this GPU host."
    )
    parser.add_argument("--server", required=True, help="the portal's URL, e.g. http://portal:8000")
    parser.add_argument(
        "--token-file",
        type=Path,
        help=f"file holding the agent token (default: the {TOKEN_VARIABLE} environment variable);"
        " keep it readable only by the agent's user",
    )
    parser.add_argument("--token", help=argparse.SUPPRESS)  # refused below, with the reason
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
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="first retry delay when the server is unreachable (heartbeats are long-polls)",
    )
    parser.add_argument(
        "--output-every",
        type=float,
        default=5.0,
        help="seconds between sending a running job's output tail",
    )
    _job_options(parser)
    return parser.parse_args(argv)


def _job_options(parser) -> None:
    """How jobs run here: as whom, with which of the agent's variables, within which limits."""
    parser.add_argument(
        "--run-as",
        metavar="USER",
        help="run jobs as this user (the agent must run as root); then jobs cannot read the"
        " token file or the agent's environment",
    )
    parser.add_argument(
        "--allow-root-jobs",
        action="store_true",
        help="an agent run as root refuses to start unless --run-as names the user jobs run"
        " as; this runs them as root instead (they could then read the token and every"
        " process on the host)",
    )
    parser.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also give jobs this variable of the agent's environment "
        f"(always given: {', '.join(ENV_ALLOWLIST)})",
    )
    parser.add_argument(
        "--output-space",
        type=_size,
        default=DEFAULT_SPACE,
        metavar="SIZE",
        help="disk the jobs' output not yet sent to the portal may take, e.g. 2G (default); "
        "what was sent is freed at once. Beyond it, while the portal cannot be reached, the "
        "oldest unsent output is dropped, and the job's output says so",
    )
    parser.add_argument(
        "--mem-per-gpu",
        type=_size,
        metavar="SIZE",
        help="memory a rank may use per GPU it is given, e.g. 64G (enforced by its cgroup;"
        " beyond it the kernel kills the job's largest process)",
    )
    parser.add_argument(
        "--cpus-per-gpu",
        type=_cpus,
        metavar="N",
        help="CPUs a rank may use per GPU it is given, e.g. 8 or 2.5 (its cgroup's CPU quota)",
    )


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _cpus(text: str) -> float:
    try:
        cpus = float(text)
    except ValueError:
        cpus = 0.0
    if not 0.01 <= cpus <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of CPUs: write e.g. 8 or 2.5")
    return cpus


def read_token(token_file: Path | None) -> tuple[str, str]:
    """(token, error): from the file if given, else from the environment variable."""
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as err:
            return "", f"cannot read --token-file {token_file}: {err.strerror}"
        return (token, "") if token else ("", f"--token-file {token_file} is empty")
    token = os.environ.pop(TOKEN_VARIABLE, "").strip()
    if not token:
        return "", f"no agent token: set {TOKEN_VARIABLE} or pass --token-file FILE"
    return token, ""


def job_user(name: str | None) -> tuple[JobUser | None, str]:
    if not name:
        return JobUser(), ""
    try:
        user = JobUser.named(name)
    except KeyError:
        return None, f"--run-as: no user named {name} on this host"
    if os.geteuid() != 0:
        return None, "--run-as needs the agent to run as root"
    return user, ""


def host_gpus(simulate: int | None) -> tuple[list[int], str]:
    """(GPU indices, error): the simulated ones, or what NVML finds."""
    if simulate is not None:
        if simulate < 1:
            return [], "--simulate needs at least 1 GPU"
        return list(range(simulate)), ""
    gpus, why = detect_gpus()
    if not gpus:
        return [], (
            f"no NVIDIA GPUs found ({why}). On a machine without GPUs, run with "
            "--simulate N to pretend to have N GPUs."
        )
    return gpus, ""


def startup(args) -> tuple[str, JobUser | None, list[int], str]:
    """(token, job user, GPUs, error): everything the agent needs before it registers."""
    if args.token is not None:
        return (
            "",
            None,
            [],
            (
                f"--token is not accepted: every process on this host can read a command "
                f"line. Set {TOKEN_VARIABLE} or pass --token-file FILE (readable only by you)."
            ),
        )
    token, error = read_token(args.token_file)
    user, user_error = job_user(args.run_as)
    gpus, gpu_error = ([], "") if error or user_error else host_gpus(args.simulate)
    return token, user, gpus, error or user_error or gpu_error or root_jobs_error(args)


def root_jobs_error(args) -> str:
    if os.geteuid() != 0 or args.run_as or args.allow_root_jobs:
        return ""
    return (
        "the agent runs as root, so its jobs would too, and could read its token and every "
        "process on this host. Pass --run-as USER (an unprivileged user for jobs), or "
        "--allow-root-jobs if jobs really must run as root."
    )


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    token, user, gpus, error = startup(args)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args.work_dir.mkdir(parents=True, exist_ok=True)
    client = Client(args.server, token)
    try:
        return serve(args, client, user, gpus)
    finally:
        client.close()  # its open connections end with it, when main is called in-process


def serve(args, client: Client, user: JobUser | None, gpus: list[int]) -> int:
    """Register, then run until stopped; the exit code."""
    try:
        agent = Agent(
            client,
            name=args.name,
            capacity_unit=args.capacity_unit,
            gpus=gpus,
            work_dir=args.work_dir.resolve(),
            address=args.address or args.name,
            interval=args.interval,
            output_every=args.output_every,
            user=user,
            pass_env=tuple(args.pass_env),
            limits=Limits(args.mem_per_gpu, args.cpus_per_gpu),
            output_space=args.output_space,
        )
    except ContainmentError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
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
