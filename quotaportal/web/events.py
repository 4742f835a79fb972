"""Audit events as sentences a person reads: who did what, and for a preemption both sides,
with links. The job page's timeline, the dashboard and the audit log all use these."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import format_html, format_html_join

from quotaportal.quotas.models import Job

LABELS = {
    "submitted": "Submitted",
    "released": "Released: what it waited for came",
    "dispatched": "Dispatched",
    "starting": "Starting: handed to its host",
    "started": "Started",
    "preempted_cross_share": "Preempted (cross-share)",
    "preempted_in_share": "Preempted (in-share)",
    "preempted_capacity": "Preempted (reservation ended)",
    "preemption_completed": "Preemption completed",
    "priority_changed": "Priority changed",
    "retried": "Failed; will retry",
    "succeeded": "Succeeded",
    "failed": "Failed",
    "terminated": "Terminated",
    "share_created": "Share created",
    "share_changed": "Share changed",
    "share_deleted": "Share deleted",
    "resource_changed": "Settings changed",
    "aws_pushed": "Sent to AWS Batch",
    "aws_sync_failed": "AWS sync failed",
    "aws_sync_recovered": "AWS sync recovered",
    "aws_drift": "Changed in AWS",
    "aws_drift_resolved": "Drift resolved",
    "aws_imported": "Imported from AWS Batch",
    "slurm_unavailable": "Slurm unreachable",
    "slurm_recovered": "Slurm reachable again",
    "signed_in": "Signed in",
    "signed_out": "Signed out",
    "sign_in_refused": "Sign-in refused",
}


def _job_link(job_id: str, names: dict) -> str:
    name, share = names.get(str(job_id), ("a job since deleted", ""))
    link = format_html('<a href="{}">{}</a>', reverse("job-detail", args=[job_id]), name)
    return format_html("{} ({})", link, share) if share else link


def _jobs_named(events) -> dict[str, tuple[str, str]]:
    wanted = set()
    for event in events:
        detail = event.detail if isinstance(event.detail, dict) else {}
        if detail.get("preempted_by"):
            wanted.add(str(detail["preempted_by"]))
        wanted.update(str(i) for i in detail.get("preempted", []) or [])
    rows = Job.objects.filter(pk__in=wanted).values_list("pk", "name", "share_name")
    return {str(pk): (name, share) for pk, name, share in rows}


# One function per kind: (kind, detail, share name, job names) -> the sentence.


def _submitted(kind, d, share, names):
    return format_html(
        "Submitted to {}: {} × {} at priority {}",
        share or "its share",
        d.get("quantity", "?"),
        d.get("capacity_unit", "?"),
        d.get("scheduling_priority", "?"),
    )


def _dispatched(kind, d, share, names):
    where = (
        "on capacity borrowed from idle shares"
        if d.get("borrowing")
        else (f"within {share}'s limit" if share else "within its share's limit")
    )
    victims = d.get("preempted") or []
    if not victims:
        return format_html("Dispatched {}", where)
    taken = format_html_join(", ", "{}", ((_job_link(v, names),) for v in victims))
    how = (
        "preempting lower-priority"
        if d.get("preemption_kind") == "in_share"
        else "taking back lent capacity from"
    )
    return format_html("Dispatched {}, after {} {}", where, how, taken)


def _preempted(kind, d, share, names):
    by = d.get("preempted_by")
    if not by:
        return format_html("Preempted: {}", d.get("reason", ""))
    who = _job_link(by, names)
    if kind == "preempted_in_share":
        return format_html("Preempted by higher-priority {} of the same share", who)
    by_share = names.get(str(by), ("", ""))[1]
    return format_html(
        "Preempted by {} to take back {}'s lent capacity", who, by_share or "its share"
    )


def _preemption_completed(kind, d, share, names):
    count = d.get("preempted_count")
    times = f" (preempted {count} time{'s' if count != 1 else ''} so far)" if count else ""
    if d.get("requeued"):
        return format_html("Preemption completed: its attempt stopped; back in line{}", times)
    return format_html("Preemption completed: its attempt stopped{}", times)


def _priority_changed(kind, d, share, names):
    return format_html("Priority changed from {} to {}", d.get("from"), d.get("to"))


def _ended(kind, d, share, names):
    reason = d.get("reason") or ""
    code = d.get("exit_code")
    tail = f" (exit code {code})" if code not in (None, 0) else ""
    return format_html("{}{}{}", LABELS[kind], f": {reason}" if reason else "", tail)


def _resource_changed(kind, d, share, names):
    where = f" in team {d['team']}" if d.get("team") else ""
    if d.get("source"):  # a sign-in's claims changed it
        where += f", from the {d['source']}" + (f" group {d['group']}" if d.get("group") else "")
    return format_html(
        "{} {} {}{}",
        str(d.get("action", "changed")).capitalize(),
        d.get("resource", ""),
        d.get("name", ""),
        where,
    )


def _signed(kind, d, share, names):
    address = f" from {d['address']}" if d.get("address") else ""
    if kind == "signed_out":
        return format_html("Signed out{}", address)
    if kind == "signed_in":
        return format_html("Signed in with {}{}", d.get("method", "?"), address)
    who = f" as {d['username']}" if d.get("username") else ""
    return format_html(
        "Sign-in{} with {} refused{}: {}", who, d.get("method", "?"), address, d.get("reason", "")
    )


def _share_changed(kind, d, share, names):
    listed = "; ".join(
        f"{field.replace('_', ' ')} {plain_setting(old)} → {plain_setting(new)}"
        for field, (old, new) in (d.get("changes") or {}).items()
    )
    return format_html("Changed share {}: {}", share or "?", listed or "nothing")


def _share_created(kind, d, share, names):
    return format_html(
        "Created share {}: {}, limits {}",
        d.get("name", share),
        d.get("sharing_strategy", ""),
        plain_setting(d.get("capacity_limits", {})),
    )


def _share_deleted(kind, d, share, names):
    return format_html("Deleted share {}", d.get("name", share))


def _aws_pushed(kind, d, share, names):
    what = d.get("what", "")
    if "scheduling_priority" in d:
        what = f"priority {d['scheduling_priority']}"
    if d.get("aws_job_id"):
        what = f"{what} as AWS job {d['aws_job_id']}"
    return format_html("Sent to AWS Batch: {}", what)


REMOTE_OF_KIND = {"aws": "AWS sync", "slurm": "Slurm"}


def _connection(kind, d, share, names):
    """A remote scheduler's connection failed, or works again (AWS Batch, Slurm)."""
    remote = REMOTE_OF_KIND[kind.split("_")[0]]
    if kind.endswith("recovered"):
        return format_html(
            "{} of {} works again after {} failure(s)",
            remote,
            d.get("environment", "?"),
            d.get("after_failures", "?"),
        )
    return format_html(
        "{} of {} failed ({} in a row; next try in {} s): {}",
        remote,
        d.get("environment", "?"),
        d.get("failures_in_a_row", "?"),
        d.get("retry_in_seconds", "?"),
        d.get("error", ""),
    )


def _aws_drift(kind, d, share, names):
    if kind == "aws_drift_resolved":
        choice = "kept the portal's value" if d.get("decision") == "keep" else "adopted AWS's value"
        return format_html("Drift of share {} resolved: {}", share or "?", choice)
    return format_html(
        "{} was changed in AWS: AWS has {}; {}",
        d.get("resource", "?"),
        _plain_config(d.get("aws")),
        d.get("resolution", "held for an admin on the share's page"),
    )


def _plain_config(config) -> str:
    if not isinstance(config, dict):
        return "?"
    return "; ".join(
        f"{key.replace('_', ' ')} {plain_setting(value)}" for key, value in config.items()
    )


def _aws_imported(kind, d, share, names):
    if "shares" in d:
        return format_html(
            "Imported from AWS Batch ({}): {} share(s), {} job(s)",
            d.get("region", "?"),
            d.get("shares"),
            d.get("jobs"),
        )
    return format_html("Imported: {}", d.get("how", "found in AWS Batch"))


SENTENCES = {
    "aws_pushed": _aws_pushed,
    "aws_sync_failed": _connection,
    "aws_sync_recovered": _connection,
    "slurm_unavailable": _connection,
    "slurm_recovered": _connection,
    "aws_drift": _aws_drift,
    "aws_drift_resolved": _aws_drift,
    "aws_imported": _aws_imported,
    "submitted": _submitted,
    "dispatched": _dispatched,
    "preempted_cross_share": _preempted,
    "preempted_in_share": _preempted,
    "preempted_capacity": _preempted,
    "preemption_completed": _preemption_completed,
    "priority_changed": _priority_changed,
    "retried": _ended,
    "failed": _ended,
    "succeeded": _ended,
    "terminated": _ended,
    "resource_changed": _resource_changed,
    "share_changed": _share_changed,
    "share_created": _share_created,
    "share_deleted": _share_deleted,
    "signed_in": _signed,
    "signed_out": _signed,
    "sign_in_refused": _signed,
}


def _sentence(event, names: dict) -> str:
    detail = event.detail if isinstance(event.detail, dict) else {}
    share = event.share.name if event.share_id and event.share else ""
    write = SENTENCES.get(event.kind)
    return write(event.kind, detail, share, names) if write else LABELS.get(event.kind, event.kind)


def plain_setting(value) -> str:
    """A setting as words: {"a100": 2} -> "a100: 2"; -1 borrow limit -> "unlimited"."""
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return "unlimited" if value == -1 else str(value)


def describe(events) -> list:
    """The events, each with `label` and `sentence` set, in two queries at most."""
    events = list(events)
    names = _jobs_named(events)
    for event in events:
        event.label = LABELS.get(event.kind, event.kind)
        event.sentence = _sentence(event, names)
    return events
