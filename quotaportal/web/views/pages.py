"""Read-only pages: GPU hosts and the audit log."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import GpuHost
from quotaportal.quotas.errors import Forbidden, InvalidInput
from quotaportal.quotas.models import Backend, Event, EventKind, ServiceEnvironment
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.web.views.common import forbid_on, paginate, query_without_page


@login_required
def host_list(request):
    hosts = GpuHost.objects.select_related("service_environment", "capacity_unit").order_by("name")
    local = ServiceEnvironment.objects.filter(backend=Backend.LOCAL).order_by("name")
    return render(
        request,
        "web/hosts.html",
        {"hosts": hosts, "local_environments": local, "is_admin": is_platform_admin(request.user)},
    )


@login_required
@require_POST
def host_state(request, pk):
    host = get_object_or_404(GpuHost, pk=pk)
    try:
        host_services.set_host_state(request.user, host, request.POST.get("state", ""))
    except Forbidden as err:
        forbid_on(err)
    except InvalidInput as err:
        messages.error(request, err.message)
    return redirect("host-list")


@login_required
@require_POST
def agent_token(request, pk):
    """Admins: a new agent token, shown once with the command that uses it."""
    env = get_object_or_404(ServiceEnvironment, pk=pk)
    try:
        token = host_services.create_agent_token(request.user, env)
    except Forbidden as err:
        forbid_on(err)
    server = request.build_absolute_uri("/").rstrip("/")
    command = (
        f"quotaportal-agent --server {server} --token {token} --capacity-unit UNIT [--simulate N]"
    )
    return render(request, "web/agent_token.html", {"env": env, "command": command})


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
