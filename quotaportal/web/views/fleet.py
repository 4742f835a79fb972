"""The fleet at a glance: every environment and queue, what is used, borrowed and lent, and
what waits; each queue links into its dashboard."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone

from quotaportal.quotas import selectors
from quotaportal.quotas.reasons import SHORT_REASONS

REFRESH_SECONDS = 5


@login_required
def fleet(request):
    now = timezone.now()
    environments = selectors.fleet_overview()
    for entry in environments:
        for row in entry["queues"]:
            since = row["longest_since"]
            row["longest_wait_s"] = (now - since).total_seconds() if since else None
            row["longest_reason_text"] = SHORT_REASONS.get(
                row["longest_reason"], row["longest_reason"] or "not planned yet"
            )
    context = {"environments": environments, "refresh_seconds": REFRESH_SECONDS}
    template = "web/fleet.html#live" if request.htmx else "web/fleet.html"
    return render(request, template, context)
