"""Admin console, people: teams and members, user accounts, invite links and API tokens."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.tokens import default_token_generator
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from quotaportal.quotas import services
from quotaportal.quotas.models import Membership, Team
from quotaportal.quotas.services import accounts
from quotaportal.web.forms.manage import MemberForm, TeamForm, UserCreateForm, UserEmailForm
from quotaportal.web.views.manage.common import (
    AdminDeleteView,
    ListWithForm,
    act,
    page,
    require_admin,
    saved,
    succeed,
)


class TeamsView(ListWithForm):
    form_class = TeamForm
    template_name = "web/manage_teams.html"

    def rows(self) -> dict:
        teams = Team.objects.annotate(
            member_count=Count("membership", distinct=True),
            share_count=Count("quota_shares", distinct=True),
        )
        return {"teams": teams.order_by("name")}

    def create(self, data: dict):
        return services.create_team(self.request.user, **data)

    def created(self, team):
        message = f"Created team {team.name}. Add its members below."
        return succeed(self.request, message, "manage-team", team.pk)


teams = TeamsView.as_view()


@login_required
def team(request, pk):
    require_admin(request)
    team = get_object_or_404(Team, pk=pk)
    rename = TeamForm(
        request.POST if request.POST.get("form") == "rename" else None,
        initial={"name": team.name},
        prefix="rename",
    )
    member = MemberForm(
        request.POST if request.POST.get("form") == "member" else None, prefix="member"
    )
    if request.method == "POST":
        if request.POST.get("form") == "rename":
            done = saved(rename, lambda d: accounts.rename_team(request.user, team, d["name"]))
            message = f"Renamed the team to {team.name}."
        else:
            done = saved(
                member,
                lambda d: accounts.set_member(
                    request.user, team, d["user"], is_admin=d["role"] == "admin"
                ),
            )
            message = "Saved the membership."
        if done is not None:
            messages.success(request, message)
            return redirect("manage-team", team.pk)
    members = Membership.objects.filter(team=team).select_related("user").order_by("user__username")
    shares = team.quota_shares.select_related("job_queue").order_by("job_queue__name", "name")
    context = {"team": team, "rename": rename, "member": member, "members": members}
    return page(
        request,
        "web/manage_team.html",
        {**context, "shares": shares},
        failed=request.method == "POST",
    )


@require_POST
@login_required
def team_member_remove(request, pk, user_id):
    require_admin(request)
    team = get_object_or_404(Team, pk=pk)
    user = get_object_or_404(get_user_model(), pk=user_id)
    return act(
        request,
        lambda: accounts.remove_member(request.user, team, user),
        f"Removed {user.username} from {team.name}.",
        "manage-team",
        team.pk,
    )


class TeamDeleteView(AdminDeleteView):
    model, kind, listed, detail = Team, "team", "manage-teams", "manage-team"

    def delete(self, team) -> None:
        accounts.delete_team(self.request.user, team)


team_delete = TeamDeleteView.as_view()


def invite_days() -> int:
    return settings.PASSWORD_RESET_TIMEOUT // 86_400


def invite_link(request, user) -> str:
    """Where the user chooses a password: works once, until the password changes or the
    link is older than PASSWORD_RESET_TIMEOUT."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return request.build_absolute_uri(reverse("invite", args=[uid, token]))


@never_cache  # the answer may show an invite link or a token, once
@login_required
def users(request):
    require_admin(request)
    form = UserCreateForm(request.POST or None)
    created = None
    if request.method == "POST":
        created = saved(
            form,
            lambda d: accounts.create_account(
                request.user,
                username=d["username"],
                email=d["email"],
                admin=d["admin"],
                teams=list(d["teams"]),
            ),
        )
    rows = get_user_model().objects.order_by("username").prefetch_related("teams")
    context = {"users": rows, "form": form}
    if created is not None:
        user, token = created
        messages.success(request, f"Created user {user.username}. Hand over the link below.")
        context.update(
            new_user=user, invite=invite_link(request, user), token=token, invite_days=invite_days()
        )
        form = UserCreateForm()
        context["form"] = form
    return page(
        request,
        "web/manage_users.html",
        context,
        failed=request.method == "POST" and created is None,
    )


@never_cache
@login_required
def user(request, pk):
    require_admin(request)
    account = get_object_or_404(get_user_model(), pk=pk)
    context = {"account": account, "teams": account.teams.order_by("name")}
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "invite":
            accounts.reset_password(request.user, account)
            context.update(invite=invite_link(request, account), invite_days=invite_days())
        elif action == "token":
            context["token"] = accounts.new_api_token(request.user, account)
        elif action == "revoke-token":
            return act(
                request,
                lambda: accounts.revoke_api_token(request.user, account),
                f"Revoked every API token of {account.username}.",
                "manage-user",
                account.pk,
            )
        elif action == "email":
            form = UserEmailForm(request.POST)
            if saved(form, lambda d: accounts.set_email(request.user, account, d["email"])):
                return succeed(
                    request,
                    f"Saved the e-mail address of {account.username}.",
                    "manage-user",
                    account.pk,
                )
            context["email_form"] = form
        elif action in ("deactivate", "reactivate"):
            return act(
                request,
                lambda: accounts.set_active(request.user, account, action == "reactivate"),
                f"{account.username} is now {'active' if action == 'reactivate' else 'inactive'}.",
                "manage-user",
                account.pk,
            )
        else:
            messages.error(request, "Unknown action.")
            return redirect("manage-user", account.pk)
    context.setdefault("email_form", UserEmailForm(initial={"email": account.email}))
    context.update(
        token_count=account.personal_tokens.filter(revoked_at__isnull=True).count(),
        has_legacy=hasattr(account, "auth_token"),
        provider=getattr(account, "provider_account", None),
    )
    return page(request, "web/manage_user.html", context, failed=context["email_form"].is_bound)
