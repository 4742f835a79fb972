"""qp usage and qp shares: who used what, and each share's limits, use and standing."""

from __future__ import annotations

import click
from rich.table import Table

from qp import words
from qp.commanding import client, command, out

# -- usage, shares -------------------------------------------------------------------------


@click.command()
@click.option(
    "--by",
    "group_by",
    default="team",
    show_default=True,
    type=click.Choice(["team", "share", "user", "unit", "queue"]),
)
@click.option("--since", default="7d", show_default=True, help="7d, 24h, or an ISO date.")
@click.option("--queue", help="Only this job queue.")
@command
def usage(group_by, since, queue, as_json):
    """GPU-hours used, own and borrowed, lost to preemption, and waits."""
    start = _since(since)
    report = client().get("usage/", group_by=group_by, start=start, job_queue=queue)
    if as_json:
        return report
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in (group_by.upper(), "HOURS", "OWN", "BORROWED", "PREEMPTED", "JOBS", "WAIT P50"):
        table.add_column(column, justify="left" if column == group_by.upper() else "right")
    for row in report["rows"]:
        wait = row.get("wait_p50_s")
        table.add_row(
            row["key"],
            words.hours(row["instance_seconds"]),
            words.hours(row["own_instance_seconds"]),
            words.hours(row["borrowed_instance_seconds"]),
            words.hours(row["preempted_instance_seconds"]),
            str(row["jobs"]),
            words.span(wait) if wait is not None else "—",
        )
    out.print(f"Usage from {report['start']} to {report['end']} (GPU-hours)", markup=False)
    out.print(table)
    return None


def _since(text: str) -> str:
    from datetime import UTC, datetime, timedelta

    if text[-1:] in "hd" and text[:-1].isdigit():
        amount = int(text[:-1])
        delta = timedelta(hours=amount) if text.endswith("h") else timedelta(days=amount)
        return (datetime.now(UTC) - delta).isoformat()
    return text  # the portal checks an ISO time and says what is wrong


@click.command()
@click.option("--queue", help="Only this job queue.")
@command
def shares(queue, as_json):
    """Quota shares: limit, used, borrowed and lent per unit, and each share's fair-share
    standing (its decayed past use per weight; the lowest borrows first)."""
    api = client()
    queues = [q["name"] for q in api.get("job-queues/")["results"]]
    rows = []
    for name in queues:
        if queue and name != queue:
            continue
        snapshot = api.get(f"job-queues/{name}/snapshot/")
        standing = _standings(api, name)
        for share, units in sorted(snapshot["share_utilization"].items()):
            for unit, figures in sorted(units.items()):
                rows.append(
                    {
                        "job_queue": name,
                        "quota_share": share,
                        "unit": unit,
                        **figures,
                        "fair_share_standing": standing.get(share),
                    }
                )
    if as_json:
        return rows
    table = Table(box=None, pad_edge=False, header_style="bold")
    figures = ("LIMIT", "USED", "BORROWED", "LENT", "STANDING")
    for column in ("QUEUE", "SHARE", "UNIT", *figures):
        table.add_column(column, justify="right" if column in figures else "left")
    for row in rows:
        standing = row["fair_share_standing"]
        table.add_row(
            row["job_queue"],
            row["quota_share"],
            row["unit"],
            *(str(row.get(k, 0)) for k in ("limit", "used", "borrowed", "lent")),
            "—" if standing is None else f"{standing:,.1f} h",
        )
    out.print(table)
    return None


def _standings(api, queue: str) -> dict:
    """Share -> fair-share standing (instance-hours per weight; None without a policy)."""
    found = api.get("quota-shares/", job_queue=queue, limit=1000)
    return {share["name"]: share.get("fair_share_standing") for share in found["results"]}
