"""Read-only pages: GPU hosts and the audit log."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from quotaportal.hosts.models import GpuHost
from quotaportal.quotas.models import Event, EventKind
from quotaportal.web.views.common import paginate, query_without_page


@login_required
def host_list(request):
    hosts = GpuHost.objects.select_related("service_environment", "capacity_unit").order_by("name")
    return render(request, "web/hosts.html", {"hosts": hosts})


@login_required
def audit_log(request):
    events = Event.objects.select_related("job", "share", "job_queue").order_by("-time", "-id")
    kind = request.GET.get("kind")
    if kind in EventKind.values:
        events = events.filter(kind=kind)
    page = paginate(request, events, size=50)
    return render(
        request,
        "web/audit.html",
        {
            "page": page,
            "kinds": EventKind.values,
            "kind": kind,
            "query": query_without_page(request),
        },
    )
