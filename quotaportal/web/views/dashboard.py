"""The dashboard: per job queue, live share utilization, recent preemptions, history."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from quotaportal.quotas import selectors
from quotaportal.quotas.dashboard import dashboard_version, queue_dashboard, with_bars
from quotaportal.quotas.models import Backend, JobQueue
from quotaportal.tick import bridge
from quotaportal.web.charts import share_colours, usage_chart
from quotaportal.web.dashboard_cards import OTHERS, folded_samples, pick_cards
from quotaportal.web.events import describe

# The chart's windows: the picker's value, its button, its title's words, its span.
WINDOWS = {
    "15m": ("15 min", "15 min", timedelta(minutes=15)),
    "1h": ("1 h", "hour", timedelta(hours=1)),
    "24h": ("24 h", "24 h", timedelta(hours=24)),
    "7d": ("7 d", "7 days", timedelta(days=7)),
}
DEFAULT_WINDOW = "1h"
OTHERS_COLOUR = "#9ca3af"  # the shares without a card, summed in the chart


@login_required
def dashboard(request):
    queues = list(JobQueue.objects.select_related("service_environment").order_by("name"))
    queue = next(
        (q for q in queues if q.name == request.GET.get("queue")), queues[0] if queues else None
    )
    window = request.GET.get("window")
    window = window if window in WINDOWS else DEFAULT_WINDOW
    _, words, span = WINDOWS[window]
    context = {
        "queues": queues,
        "queue": queue,
        "refresh_seconds": 2,
        "window": window,
        "window_words": words,
        "windows": [(key, button) for key, (button, _, _) in WINDOWS.items()],
    }
    if queue is not None:
        now = timezone.now()
        capacity = bridge.capacity_of(queue, now)
        version = dashboard_version(queue, capacity, now)
        if request.htmx and request.GET.get("since") == version:
            # Nothing new: an empty 204, which htmx does not swap in.
            return HttpResponse(status=204)
        context["version"] = version
        data = queue_dashboard(queue, capacity, since=now - span)
        data["preemptions"] = describe(data["preemptions"])
        colours = share_colours(row["share"].name for row in data["shares"])
        for row in data["shares"]:
            row["colour"] = colours[row["share"].name]
        show_all = request.GET.get("shares") == "all"
        find = request.GET.get("share", "")[:128]
        cards = pick_cards(data["shares"], show_all=show_all, find=find)
        history = data["history"]
        if cards.hidden:
            history = folded_samples(history, {row["share"].name for row in cards.shown})
            colours = {**colours, OTHERS: OTHERS_COLOUR}
        context |= data | {
            "shares": with_bars(cards.shown),
            "cards": cards,
            "show_all": show_all,
            "find": find,
            "chart": usage_chart(history, data["capacity"], now, span, colours),
            "jobs_url": f"{reverse('job-list')}?job_queue={quote(queue.name)}&quota_share=",
            "aws": queue.service_environment.backend == Backend.AWS_BATCH,
            "connection": selectors.connection_health(queue.service_environment),
        }
    template = "web/dashboard.html#live" if request.htmx else "web/dashboard.html"
    return render(request, template, context)
