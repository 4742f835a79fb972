"""qp: quotaportal from a terminal, the habits of sbatch, squeue and scancel kept.

Every command talks to the portal's REST API only, with the token `qp login` stored. Each
takes --json for scripts; exit codes: 0 done, 1 the portal refused (bad input, a conflict),
2 a wrong command line, 3 not signed in, 4 not allowed, 5 no such job, 6 portal unreachable.
"""

from __future__ import annotations

import json
import socket
import sys
import time

import click
from rich.table import Table

from qp import config, directives, login, reports, submitting, words
from qp.client import NOT_FOUND, Client, Failure
from qp.commanding import client, command, err, out

FOLLOW_PAUSE = 1.0  # between reads of a job's output while it may print more
WATCH_PAUSE = 2.0


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="quotaportal")
def main_group():
    """quotaportal from a terminal: submit, watch, read and cancel your jobs.

    Start with `qp login URL`. `qp submit train.sh` submits a Slurm script as it is."""


# -- login ---------------------------------------------------------------------------------


@main_group.command()
@click.argument("url", required=False)
@click.option("--token-stdin", is_flag=True, help="Read the token from standard input.")
@click.option("--browser", is_flag=True, help="Sign in in a browser (single sign-on too).")
@command
def login_command(url, token_stdin, browser, as_json):
    """Sign in to the portal at URL and keep a token for the next commands.

    Paste a token made on your Access page, or sign in with --browser: the portal then
    makes a token and hands it to this qp. The token is kept in a file only you can read."""
    url = (url or config.load().url).rstrip("/")
    if not url:
        raise click.UsageError("give the portal's URL: qp login https://portal.example.org")
    if browser:
        token = login.by_browser(url, socket.gethostname(), err)
    elif token_stdin:
        token = sys.stdin.readline().strip()
    else:
        err.print(f"Make a token at {url}/account/tokens/ and paste it here.", markup=False)
        token = click.prompt("Token", hide_input=True).strip()
    me = Client(url, token).get("me/")
    kept = config.save(url, token)
    if not as_json:
        teams = ", ".join(me["teams"]) or "no team yet"
        out.print(f"Signed in to {url} as {me['username']} ({teams}); token kept in {kept}.")
    return {"url": url, "username": me["username"], "teams": me["teams"], "config": str(kept)}


login_command.name = "login"


# -- submit --------------------------------------------------------------------------------


@main_group.command(context_settings={"allow_interspersed_args": False})
@click.argument("script", required=False)
@click.argument("args", nargs=-1)
@click.option("--share", help="Quota share (default: your only one).")
@click.option("--queue", help="Job queue (default: the share's).")
@click.option("--unit", help="Capacity unit, e.g. a100 (default: the share's only one).")
@click.option("-n", "--instances", type=click.IntRange(min=1), help="Instances (GPUs) it needs.")
@click.option("--priority", type=int, help="Scheduling priority (higher goes first).")
@click.option("-t", "--time-limit", help="Stop it after this long: 90 (minutes), 2h, 1-12:00.")
@click.option("-J", "--name", help="Job name (default: the script's name).")
@click.option("--env", "env", multiple=True, metavar="NAME=VALUE", help="Set in its environment.")
@click.option("--array", "array_spec", help="An array: 0-99%10 (at most 10 at once).")
@click.option(
    "--after",
    "after",
    multiple=True,
    metavar="JOB[:ok|any|notok]",
    help="Wait for another job (an id or a name of yours).",
)
@click.option("--retries", type=int, help="Attempts it may use (default 1).")
@command
def submit(script, args, as_json, **flags):
    """Submit SCRIPT (reading its #QP and #SBATCH lines), or a command after --.

    \b
      qp submit train.sh
      qp submit --instances 2 --array 0-99%10 sweep.sh
      qp submit --share vision -n 1 -- python eval.py --ckpt last.pt"""
    text, name = submitting.what_to_run(script, args)
    from_script = directives.read(text) if not args and script != "--" else directives.Request()
    asked = submitting.from_flags(flags).merged_over(from_script)
    for note in asked.notes:
        err.print(f"note: {note}", markup=False)
    api = client()
    me = api.get("me/")
    body = submitting.submission(api, me, asked, text, name)
    if asked.array:
        body.update(array_size=asked.array.size, array_max_running=asked.array.max_running)
        made = api.post("job-arrays/", body)
        if not as_json:
            limit = f", at most {made['max_running']} at once" if made["max_running"] else ""
            out.print(f"Submitted array {made['name']} ({made['size']} jobs{limit}): {made['id']}")
        return made
    made = api.post("jobs/", body)
    if not as_json:
        out.print(f"Submitted job {made['name']}: {made['id']}", markup=False)
        if made["status"] == "PENDING":
            out.print(f"It waits: {made['status_reason']}.", markup=False)
    return made


# -- jobs, show ----------------------------------------------------------------------------


@main_group.command()
@click.option("--me", "mine", is_flag=True, help="Only the jobs you submitted.")
@click.option("--share", help="Only this quota share's.")
@click.option("--status", help="Only jobs in this status (RUNNABLE, RUNNING, …).")
@click.option("--array", "array_id", help="Only this array's children.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--watch", is_flag=True, help="Refresh every 2 s until Ctrl-C.")
@command
def jobs(mine, share, status, array_id, limit, watch, as_json):
    """Jobs, newest first: status, and why each waits (like squeue)."""
    api = client()
    user = api.get("me/")["username"] if mine else None
    query = {
        "user": user,
        "quota_share": share,
        "status": status,
        "array": array_id,
        "page_size": limit,
    }
    while True:
        found = api.get("jobs/", **query)["results"][:limit]
        if as_json:
            return found
        if watch:
            click.clear()
        out.print(_jobs_table(found))
        if not watch:
            return None
        try:
            time.sleep(WATCH_PAUSE)
        except KeyboardInterrupt:
            return None


def _jobs_table(found: list[dict]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("ID", "NAME", "SHARE", "STATUS", "PRI", "N", "WAITING / SUBMITTED"):
        table.add_column(column, no_wrap=column != "WAITING / SUBMITTED")
    for job in found:
        table.add_row(
            job["id"][:8],
            job["name"],
            job["quota_share"],
            job["status"],
            str(job["scheduling_priority"]),
            str(job["quantity"]),
            words.waiting(job) or words.when(job["created_at"]),
        )
    if not found:
        table.add_row("", "no jobs", "", "", "", "", "")
    return table


@main_group.command()
@click.argument("job")
@command
def show(job, as_json):
    """One job (or array): where it stands, why it waits, its attempts."""
    api = client()
    kind, found = _job_or_array(api, job)
    if as_json:
        return found
    if kind == "array":
        counts = ", ".join(f"{n} {s}" for s, n in found["counts"].items() if n)
        limit = found["max_running"] or "no limit"
        out.print(f"Array {found['name']} ({found['size']} jobs, at once: {limit})", markup=False)
        out.print(f"  {counts}", markup=False)
        out.print(f"  children: qp jobs --array {found['id']}", markup=False)
        return None
    lines = [
        f"{found['name']}  {found['id']}",
        f"  status     {found['status']}  {found['status_reason']}".rstrip(),
        f"  waiting    {words.waiting(found)}" if found.get("waiting_because") else "",
        f"  fair share {found['fair_share_reason']}" if found.get("fair_share_reason") else "",
        f"  share      {found['job_queue']}/{found['quota_share']}  "
        f"{found['quantity']} × {found['capacity_unit']}, priority {found['scheduling_priority']}",
        f"  array      child {found['array']['index']} of {found['array']['name']}"
        if found.get("array")
        else "",
        *(f"  after      {d['type']} {d['job_id']}" for d in found.get("depends_on") or []),
        f"  submitted  {found['created_at']} by {found['submitted_by']}",
    ]
    for attempt in found["attempts"]:
        where = attempt.get("host") or (attempt.get("slurm") or {}).get("job_id") or "—"
        ended = attempt["status_reason"] or ("running" if not attempt["stopped_at"] else "")
        lines.append(f"  attempt {attempt['number']}  on {where}  {ended}")
    out.print("\n".join(line for line in lines if line), markup=False)
    return None


def _job_or_array(api: Client, job: str) -> tuple[str, dict]:
    job_id = submitting.job_id(api, job)
    try:
        return "job", api.get(f"jobs/{job_id}/")
    except Failure as failure:
        if failure.code != NOT_FOUND:
            raise
    try:
        return "array", api.get(f"job-arrays/{job_id}/")
    except Failure as failure:
        if failure.code == NOT_FOUND:
            raise Failure(f"no job or array {job}", NOT_FOUND) from None
        raise


# -- logs ----------------------------------------------------------------------------------


@main_group.command()
@click.argument("job")
@click.option("-f", "--follow", is_flag=True, help="Keep printing as the job prints.")
@click.option("--rank", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--attempt", type=click.IntRange(min=1), help="Its number (default: the latest).")
@command
def logs(job, follow, rank, attempt, as_json):
    """A job's whole output (like tail -f slurm-123.out with -f)."""
    api = client()
    job_id = submitting.job_id(api, job)
    offset, said = 0, 0.0
    stdout = sys.stdout.buffer
    while True:
        response = api.raw(f"jobs/{job_id}/logs/", rank=rank, attempt=attempt, offset=offset)
        data = response.content
        if data:
            try:
                stdout.write(data)
                stdout.flush()
            except BrokenPipeError:  # qp logs JOB | head
                sys.stderr.close()
                return
        offset = int(response.headers.get("X-QP-Next-Offset", offset + len(data)))
        if response.headers.get("X-QP-Complete") == "true" or (not follow and len(data) == 0):
            return
        if not data:
            if time.monotonic() - said > 15:
                said = time.monotonic()
                _say_where(api, job_id, response.headers.get("X-QP-Attempt"))
            time.sleep(FOLLOW_PAUSE)


def _say_where(api: Client, job_id: str, attempt: str | None) -> None:
    """While nothing new arrives: the job's status on stderr, so a long wait shows why."""
    job = api.get(f"jobs/{job_id}/")
    if job["status"] in ("PENDING", "RUNNABLE"):
        err.print(f"[qp] {job['name']} is {job['status']}: {words.waiting(job)}", markup=False)
    elif not attempt:
        err.print(f"[qp] {job['name']} is {job['status']}; no output yet", markup=False)


# -- priority, cancel ----------------------------------------------------------------------


@main_group.command()
@click.argument("job")
@click.argument("priority", type=int)
@command
def priority(job, priority, as_json):
    """Raise or lower a waiting job's (or a whole array's) priority: the portal says its range."""
    api = client()
    kind, found = _job_or_array(api, job)
    path = "jobs" if kind == "job" else "job-arrays"
    changed = api.patch(f"{path}/{found['id']}/", {"scheduling_priority": priority})
    if not as_json:
        out.print(f"{found['name']}: priority {priority}", markup=False)
    return changed


@main_group.command()
@click.argument("jobs_given", nargs=-1, required=True, metavar="JOB...")
@click.option("--reason", default="Cancelled with qp", show_default=True)
@command
def cancel(jobs_given, reason, as_json):
    """End jobs (or arrays) as FAILED, like scancel; running ones are stopped."""
    api = client()
    done, failed = [], []
    for job in jobs_given:
        try:
            kind, found = _job_or_array(api, job)
            path = "jobs" if kind == "job" else "job-arrays"
            api.post(f"{path}/{found['id']}/terminate/", {"reason": reason})
            done.append(found["id"])
            if not as_json:
                out.print(f"Cancelled {found['name']}", markup=False)
        except Failure as failure:
            failed.append({"job": job, "error": failure.message, "code": failure.code})
            if not as_json:
                err.print(f"qp: {job}: {failure.message}", markup=False)
    if as_json:
        click.echo(json.dumps({"cancelled": done, "failed": failed}, indent=2))
    if failed:
        sys.exit(failed[0]["code"])


# -- completion ----------------------------------------------------------------------------


@main_group.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell):
    """Print the shell's completion script: eval "$(qp completion bash)"."""
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)(main_group, {}, "qp", "_QP_COMPLETE")
    click.echo(completer.source())


main_group.add_command(reports.usage)
main_group.add_command(reports.shares)


def main(argv: list[str] | None = None) -> int:
    try:
        main_group.main(args=argv, prog_name="qp", standalone_mode=True)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 0
    return 0
