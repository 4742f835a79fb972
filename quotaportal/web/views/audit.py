"""The audit log: every event, newest first, filtered by kind, in plain words."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from quotaportal.quotas.models import Event, EventKind
from quotaportal.web.events import LABELS, describe
from quotaportal.web.views.common import paginate, query_without_page


@login_required
def audit_log(request):
    events = Event.objects.select_related("job", "share", "job_queue").order_by("-time", "-id")
    kind = request.GET.get("kind")
    if kind in EventKind.values:
        events = events.filter(kind=kind)
    page = paginate(request, events, size=50)
    page.object_list = describe(page.object_list)
    return render(
        request,
        "web/audit.html",
        {
            "page": page,
            "kinds": [(k, LABELS.get(k, k)) for k in EventKind.values],
            "kind": kind,
            "query": query_without_page(request),
        },
    )
