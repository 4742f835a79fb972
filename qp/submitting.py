"""What `qp submit` sends: the script or command, its directives under the command line's
options, and the share, queue and unit picked from what the portal says the user may use."""

from __future__ import annotations

import shlex
import sys
import uuid
from pathlib import Path

import click

from qp import directives
from qp.client import NOT_FOUND, USAGE, Client, Failure


def what_to_run(script: str | None, args: tuple[str, ...]) -> tuple[str, str]:
    """(the text to run, a name for it): a script file (or - for standard input), else the
    words given as a command."""
    if script is None:
        raise click.UsageError("give a script, or a command after --: qp submit -- nvidia-smi")
    if script == "-":
        return sys.stdin.read(), "stdin"
    path = Path(script)
    if path.is_file() and not args:
        try:
            return path.read_text(), path.stem
        except (OSError, UnicodeDecodeError) as error:
            raise click.UsageError(f"cannot read {script}: {error}") from None
    if not args and ("/" in script or path.suffix in (".sh", ".bash", ".slurm", ".sbatch")):
        raise click.UsageError(f"no such script: {script}")
    return shlex.join([script, *args]), path.name


def from_flags(flags: dict) -> directives.Request:
    asked = directives.Request(
        name=flags["name"],
        share=flags["share"],
        queue=flags["queue"],
        unit=flags["unit"],
        instances=flags["instances"],
        priority=flags["priority"],
        retries=flags["retries"],
        time_limit=directives.seconds(flags["time_limit"]) if flags["time_limit"] else None,
        array=directives.array(flags["array_spec"]) if flags["array_spec"] else None,
        env=[directives.env_pair(pair) for pair in flags["env"]],
    )
    for given in flags["after"]:
        asked.after += directives.after(given)
    return asked


def submission(api: Client, me: dict, asked, text: str, name: str) -> dict:
    share = _share(me, asked)
    unit = asked.unit or _only(share["units"], f"share {share['name']}'s units", "--unit")
    # A Slurm script reads its index as SLURM_ARRAY_TASK_ID: set from QP_ARRAY_INDEX.
    command = directives.command_for(text, asked.env, asked.array.ids if asked.array else None)
    body = {
        "name": _job_name(asked.name or name),
        "job_queue": share["job_queue"],
        "quota_share": share["name"],
        "capacity_unit": unit,
        "quantity": asked.instances or 1,
        "command": command,
    }
    if asked.priority is not None:
        body["scheduling_priority"] = asked.priority
    if asked.time_limit:
        body["attempt_duration_seconds"] = asked.time_limit
    if asked.retries:
        body["retry_attempts"] = asked.retries
    if asked.after:
        body["depends_on"] = [
            {"job_id": job_id(api, job), "type": kind} for job, kind in asked.after
        ]
    return body


def _share(me: dict, asked) -> dict:
    shares = [s for s in me["shares"] if s["state"] == "ENABLED"]
    if asked.share:
        shares = [s for s in shares if s["name"] == asked.share]
        if not shares:
            raise Failure(f"you may submit to no ENABLED share named {asked.share}", USAGE)
    if asked.queue:
        shares = [s for s in shares if s["job_queue"] == asked.queue]
    return _only(
        shares,
        "shares you may submit to",
        "--share (and --queue)",
        shown=lambda s: f"{s['job_queue']}/{s['name']}",
    )


def _only(choices: list, what: str, flag: str, shown=str):
    if len(choices) == 1:
        return choices[0]
    if not choices:
        raise Failure(f"no {what}: ask an admin", USAGE)
    listed = ", ".join(shown(c) for c in choices)
    raise Failure(f"choose one of the {what} with {flag}: {listed}", USAGE)


def _job_name(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in text)[:120]
    return cleaned.strip("-") or "job"


def job_id(api: Client, job: str) -> str:
    """A job's id from its id, or from a name of one of the user's jobs (the newest)."""
    try:
        return str(uuid.UUID(job))
    except ValueError:
        pass
    me = api.get("me/")["username"]
    found = [j for j in api.get("jobs/", name=job, user=me)["results"] if j["name"] == job]
    if not found:
        raise Failure(f"no job of yours named {job}", NOT_FOUND)
    return found[0]["id"]
