"""The GPU hosts page and its admin actions: a host's state, releasing or deleting it, and
agent tokens (a new one shown once with its command, revoking one)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import AgentToken, GpuHost
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import Backend, ServiceEnvironment
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.web.views.common import forbid_on


@login_required
def host_list(request):
    hosts = GpuHost.objects.select_related("service_environment", "capacity_unit").order_by("name")
    local = ServiceEnvironment.objects.filter(backend=Backend.LOCAL).order_by("name")
    is_admin = is_platform_admin(request.user)
    tokens = host_services.agent_tokens(request.user)[:200] if is_admin else []
    return render(
        request,
        "web/hosts.html",
        {"hosts": hosts, "local_environments": local, "is_admin": is_admin, "tokens": tokens},
    )


def _admin_action(request, action, *args) -> None:
    """Run an admin service call from a form; refusals become a 403, bad requests a message."""
    try:
        action(request.user, *args)
    except Forbidden as err:
        forbid_on(err)
    except (InvalidInput, Conflict) as err:
        messages.error(request, err.message)


def _post_action(model, service, *fields):
    """A POST-only page action on one object: the service checks the role; back to hosts."""

    @login_required
    @require_POST
    def view(request, pk):
        target = get_object_or_404(model, pk=pk)
        _admin_action(request, service, target, *(request.POST.get(f, "") for f in fields))
        return redirect("host-list")

    return view


host_state = _post_action(GpuHost, host_services.set_host_state, "state")
host_release = _post_action(GpuHost, host_services.release_host)
host_delete = _post_action(GpuHost, host_services.delete_host)
agent_token_revoke = _post_action(AgentToken, host_services.revoke_agent_token)


@login_required
@require_POST
def agent_token(request, pk):
    """Admins: a new agent token, shown once with the command that uses it."""
    env = get_object_or_404(ServiceEnvironment, pk=pk)
    host_name = request.POST.get("host_name", "").strip()
    try:
        token = host_services.create_agent_token(request.user, env, host_name)
    except Forbidden as err:
        forbid_on(err)
    except InvalidInput as err:
        messages.error(request, err.message)
        return redirect("host-list")
    server = request.build_absolute_uri("/").rstrip("/")
    name = f" --name {host_name}" if host_name else ""
    # The token goes in a file only the agent's user can read, never on the command line.
    command = (
        f"umask 077; echo '{token}' > /etc/quotaportal-agent.token\n"
        f"quotaportal-agent --server {server} --token-file /etc/quotaportal-agent.token"
        f"{name} --capacity-unit UNIT [--simulate N] [--run-as USER]"
    )
    return render(
        request, "web/agent_token.html", {"env": env, "command": command, "host_name": host_name}
    )
