"""A person's Access area: their personal API tokens and their AWS access keys (for boto3 and
the SageMaker SDK), and the sign-in page that leads there."""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from rest_framework.authtoken.models import Token

from quotaportal.awsbatch import keys as key_services
from quotaportal.awsbatch.models import AccessKey
from quotaportal.identity import oidc
from quotaportal.quotas.errors import Forbidden, ServiceError
from quotaportal.quotas.models import PersonalToken
from quotaportal.quotas.services import accounts
from quotaportal.quotas.services import tokens as token_services
from quotaportal.web.forms.common import show_service_errors
from quotaportal.web.forms.notifications import PersonalTokenForm
from quotaportal.web.views.common import forbid_on
from quotaportal.web.views.manage.common import require_admin


class SignInView(auth_views.LoginView):
    """Django's sign-in, with "Sign in with …" when a provider is configured, and without the
    password form when local accounts are switched off (QP_LOCAL_LOGIN=false)."""

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **oidc.login_context(self.request)}

    def post(self, request, *args, **kwargs):
        if not settings.QP_LOCAL_LOGIN:
            raise PermissionDenied(
                "Sign-in with a password is switched off here: use single sign-on."
            )
        return super().post(request, *args, **kwargs)


def _tokens_page(request, form=None, status=200, **extra):
    context = {
        "form": form or PersonalTokenForm(),
        "tokens": request.user.personal_tokens.all(),
        "legacy": Token.objects.filter(user=request.user).first(),
        "section": "tokens",
        **extra,
    }
    return render(request, "web/access_tokens.html", context, status=status)


@never_cache  # the page that shows a new key must never be kept by a cache or the back button
@login_required
def api_tokens(request):
    if request.method != "POST":
        return _tokens_page(request)
    form = PersonalTokenForm(request.POST)
    if not form.is_valid():
        return _tokens_page(request, form, status=400)
    try:
        token, key = token_services.create_token(request.user, request.user, **form.cleaned_data)
    except ServiceError as err:
        show_service_errors(form, err)
        return _tokens_page(request, form, status=err.status)
    return _tokens_page(request, new_token=token, key=key)


@require_POST
@login_required
def api_token_revoke(request, pk):
    """Owners revoke their own tokens; admins anyone's (from the console's list)."""
    token = get_object_or_404(PersonalToken.objects.select_related("user"), pk=pk)
    try:  # the service says who may
        token_services.revoke_token(request.user, token)
    except Forbidden as err:
        forbid_on(err)
    messages.success(
        request, f"API token {token.name} ({token.prefix}…) revoked: it no longer works."
    )
    return redirect("manage-tokens" if request.POST.get("back") == "manage" else "api-tokens")


@require_POST
@login_required
def legacy_token_revoke(request):
    accounts.revoke_own_legacy_token(request.user)
    messages.success(request, "Your legacy API token is revoked: scripts using it stop working.")
    return redirect("api-tokens")


@login_required
def manage_tokens(request):
    """Every active personal token, for admins to see who can call the API and revoke."""
    require_admin(request)
    active = PersonalToken.objects.filter(revoked_at__isnull=True).select_related("user")
    legacy = Token.objects.select_related("user").order_by("user__username")
    context = {"tokens": active.order_by("user__username", "-created_at"), "legacy": legacy}
    return render(request, "web/manage_tokens.html", context)


def _keys_page(request, **extra):
    keys = request.user.aws_access_keys.order_by("-created_at")
    endpoint = request.build_absolute_uri("/aws/batch")
    context = {"keys": keys, "endpoint": endpoint, "section": "aws", **extra}
    return render(request, "web/aws_keys.html", context)


@never_cache  # the page that shows a new secret must never be kept by a cache or the back button
@login_required
def aws_keys(request):
    if request.method != "POST":
        return _keys_page(request)
    try:
        key, secret = key_services.create_access_key(request.user, request.user)
    except ServiceError as err:
        messages.error(request, err.message)
        return redirect("aws-keys")
    return _keys_page(request, new_key=key, secret=secret)


@require_POST
@login_required
def aws_key_revoke(request, pk):
    key = get_object_or_404(AccessKey, pk=pk, user=request.user)
    key_services.revoke_access_key(request.user, key)
    messages.success(request, f"Access key {key.access_key_id} revoked: it no longer signs.")
    return redirect("aws-keys")


class CliSignInForm(forms.Form):
    """Where `qp login --browser` waits for its token: a port on this computer's loopback
    address, the state it must get back, and the computer's name for the token's name."""

    port = forms.IntegerField(min_value=1024, max_value=65535)
    state = forms.RegexField(regex=r"^[A-Za-z0-9_-]{16,128}$")
    host = forms.RegexField(regex=r"^[A-Za-z0-9._-]{0,64}$", required=False)


CLI_TOKEN_DAYS = 90


@never_cache
@login_required
def cli_sign_in(request):
    """`qp login --browser`: once signed in here (by password or the organisation's single
    sign-on), the person agrees, and the browser takes a new API token back to the qp waiting
    on this computer's loopback address (never anywhere else)."""
    form = CliSignInForm(request.POST if request.method == "POST" else request.GET)
    if not form.is_valid():
        return render(request, "web/cli_sign_in.html", {"form": form}, status=400)
    where = form.cleaned_data
    name = f"qp on {where['host'] or 'a computer'}"
    if request.method != "POST":
        return render(request, "web/cli_sign_in.html", {"form": form, "token_name": name})
    _, key = token_services.create_token(
        request.user, request.user, name=name, expires_in_days=CLI_TOKEN_DAYS
    )
    back = urlencode({"state": where["state"], "token": key})
    return redirect(f"http://127.0.0.1:{where['port']}/callback?{back}")
