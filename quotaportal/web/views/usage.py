"""Who used what over a period: a table per team, share, user, unit or queue, a stacked
chart of own and borrowed use, and the same report as CSV (the REST endpoint's)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import JobQueue
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.usage import reports, review
from quotaportal.web.charts import share_colours, stacked_chart
from quotaportal.web.views.common import forbid_on

PERIODS = {
    "24h": ("24 h", timedelta(hours=24)),
    "7d": ("7 d", timedelta(days=7)),
    "30d": ("30 d", timedelta(days=30)),
    "90d": ("90 d", timedelta(days=90)),
}
MOST_ECHOED = 32
PREEMPTION_WORDS = {
    "cross_share": "taken back by a lender",
    "in_share": "by a more urgent job of the share",
    "capacity": "at a reservation's end",
}
GROUP_LABELS = {"team": "Team", "share": "Share", "user": "User", "unit": "Unit", "queue": "Queue"}


@login_required
def usage(request):
    now = timezone.now()
    period = request.GET.get("period", "7d")
    if request.GET.get("start") or request.GET.get("end"):
        period = "custom"  # dates typed in win over the preset the form carries
    group_by = request.GET.get("group_by", "team")
    group_by = group_by if group_by in reports.GROUPS else "team"
    errors = {}
    if period == "custom":
        try:
            start, end = reports.parse_period(
                request.GET.get("start") or None, request.GET.get("end") or None, now
            )
        except ValueError as error:
            errors = error.args[0]
            start, end = now - PERIODS["7d"][1], now
    else:
        period = period if period in PERIODS else "7d"
        start, end = now - PERIODS[period][1], now
    scope = reports.scope_for(request.user)
    read = reports.sources(start, end, scope)  # the table and the chart from one reading
    report = reports.usage_report(start, end, group_by, scope, read)
    rows = [_readable(row, report["totals"]) for row in report["rows"]]
    if group_by == "share":
        _add_flags(rows)
    context = {
        "periods": PERIODS,
        "period": period,
        "group_by": group_by,
        "group_labels": GROUP_LABELS,
        "start": start,
        "end": end,
        "errors": errors,
        "report": report,
        "rows": rows,
        "review_queues": sorted({row["job_queue"] for row in rows if group_by == "share"}),
        "is_admin": is_platform_admin(request.user),
        "totals": _readable(report["totals"], report["totals"]),
        "chart": _chart(start, end, group_by, scope, read),
        "csv_url": _csv_url(start, end, group_by),
        # Cut short: a long bad value is not sent back in full.
        "custom_start": request.GET.get("start", "")[:MOST_ECHOED],
        "custom_end": request.GET.get("end", "")[:MOST_ECHOED],
    }
    return render(request, "web/usage.html", context, status=400 if errors else 200)


def _add_flags(rows: list[dict]) -> None:
    """The quota review: what each share's figures say about its terms."""
    strategies = review.share_strategies({row["job_queue"] for row in rows})
    for row in rows:
        strategy = strategies.get((row["job_queue"], row["quota_share"]), "")
        row["flags"] = review.flags(row, strategy)


@login_required
@require_POST
def usage_suggest(request):
    """Limits suggested from the period's use, opened as a what-if on its jobs."""
    if not is_platform_admin(request.user):
        raise PermissionDenied("only admins suggest new limits; you may read the usage")
    queue = get_object_or_404(JobQueue, name=request.POST.get("job_queue", "")[:128])
    period = request.POST.get("period", "7d")
    span = PERIODS.get(period, PERIODS["7d"])[1]
    now = timezone.now()
    try:
        run = review.suggest(request.user, queue, now - span, now)
    except Forbidden as err:
        forbid_on(err)
    except InvalidInput as err:
        messages.error(request, f"No suggestion: {err.message}")
        return redirect(f"{reverse('usage')}?period={period}&group_by=share")
    return redirect("what-if-run", run.pk)


def _readable(row: dict, totals: dict) -> dict:
    """The figures a person reads: hours, fractions of the fleet and of the entitlement."""
    hours = {
        name: row[name] / 3600
        for name in (
            "gpu_seconds",
            "instance_seconds",
            "own_instance_seconds",
            "borrowed_instance_seconds",
            "lent_instance_seconds",
            "preempted_instance_seconds",
            "idle_while_waiting_instance_seconds",
        )
    }
    entitled = row["entitled_instance_seconds"]
    total = totals["instance_seconds"]
    kinds = [
        (words, row[f"preempted_{kind}_instance_seconds"] / 3600)
        for kind, words in PREEMPTION_WORDS.items()
        if row[f"preempted_{kind}_instance_seconds"]
    ]
    return {
        "preempted_kinds": kinds,
        **row,
        **{name.replace("_seconds", "_hours"): value for name, value in hours.items()},
        "fleet_share": row["instance_seconds"] / total if total else None,
        "entitlement_used": row["own_instance_seconds"] / entitled if entitled else None,
    }


def _step(span: timedelta) -> timedelta:
    if span <= timedelta(hours=48):
        return timedelta(hours=1)
    if span <= timedelta(days=14):
        return timedelta(hours=6)
    return timedelta(days=1)


def _chart(start, end, group_by: str, scope, read):
    step = _step(end - start)
    buckets, series = reports.usage_series(start, end, group_by, scope, step, read)
    if not buckets or not series:
        return None
    seconds = step.total_seconds()
    # The first and last buckets are cut by the period: average over the part inside it.
    inside = [max(1.0, (min(b + step, end) - max(b, start)).total_seconds()) for b in buckets]
    colours = share_colours(series)
    values, area_colours = {}, {}
    for key, lines in series.items():
        for kind in ("own", "borrowed"):
            name = f"{key} · {kind}"
            values[name] = [round(v / s, 2) for v, s in zip(lines[kind], inside, strict=True)]
            area_colours[name] = colours[key]
    count = len(buckets)
    fractions = [i / count for i in range(count + 1)]
    label = "%b %d" if step >= timedelta(days=1) or end - start > timedelta(hours=48) else "%H:%M"
    every = max(1, count // 6)
    ticks = [(i / count, buckets[i].strftime(label)) for i in range(0, count, every)]
    pale = frozenset(name for name in values if name.endswith("borrowed"))
    chart = stacked_chart(fractions, values, 0, ticks, colours=area_colours, pale=pale)
    words = {3600: "hour", 6 * 3600: "6 hours", 86400: "day"}[int(seconds)]
    return {"chart": chart, "colours": colours, "step_words": words}


def _csv_url(start, end, group_by: str) -> str:
    query = urlencode(
        {"start": start.isoformat(), "end": end.isoformat(), "group_by": group_by, "format": "csv"}
    )
    return f"{reverse('usage-api')}?{query}"
