"""Single sign-on with an OpenID Connect provider: mozilla-django-oidc's authorization-code
flow (with PKCE, state and nonce), configured from QP_OIDC_* settings and the provider's
discovery document instead of a setting per endpoint.

mozilla-django-oidc was chosen over django-allauth because it is only the relying party:
allauth would bring its own account pages, e-mail flows and models to a portal whose accounts
are already made by admins and invite links; here the flow plugs into Django's auth backends
and the rest (who the user is here, their teams) stays in identity.claims.
"""

from __future__ import annotations

import logging
import time

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import SuspiciousOperation
from django.http import Http404
from django.shortcuts import render
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from quotaportal.identity import audit, claims
from quotaportal.identity.models import ProviderAccount

log = logging.getLogger(__name__)

DISCOVERY_SECONDS = 3600  # providers rotate endpoints rarely; their keys are read per sign-in
TIMEOUT = 10
_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_discovered: dict[str, tuple[float, dict]] = {}


class Refused(SuspiciousOperation):
    """A sign-in the portal turns down, with the reason shown to the person."""


def configured() -> bool:
    return bool(settings.QP_OIDC_ISSUER and settings.QP_OIDC_CLIENT_ID)


def issuer() -> str:
    return settings.QP_OIDC_ISSUER.rstrip("/")


def discovery() -> dict:
    """The provider's /.well-known/openid-configuration, cached for DISCOVERY_SECONDS."""
    now = time.monotonic()
    cached = _discovered.get(issuer())
    if cached and now - cached[0] < DISCOVERY_SECONDS:
        return cached[1]
    answer = requests.get(f"{issuer()}/.well-known/openid-configuration", timeout=TIMEOUT)
    answer.raise_for_status()
    document = answer.json()
    if document.get("issuer", "").rstrip("/") != issuer():
        raise Refused(f"the provider names itself {document.get('issuer')!r}, not {issuer()!r}")
    _discovered[issuer()] = (now, document)
    return document


def forget_discovery() -> None:
    _discovered.clear()


def setting(attr: str, *default):
    """mozilla-django-oidc's settings, answered from QP_OIDC_* and the discovery document."""
    if attr in _ENDPOINTS:
        return discovery()[_ENDPOINTS[attr]]
    ours = {
        "OIDC_RP_CLIENT_ID": settings.QP_OIDC_CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": settings.QP_OIDC_CLIENT_SECRET,
        "OIDC_RP_SIGN_ALGO": settings.QP_OIDC_SIGN_ALGO,
        "OIDC_RP_SCOPES": settings.QP_OIDC_SCOPES,
        "OIDC_USE_PKCE": True,
        "OIDC_USE_NONCE": True,
        "OIDC_TIMEOUT": TIMEOUT,
        "OIDC_CREATE_USER": True,
    }
    if attr in ours:
        return ours[attr]
    return import_from_settings(attr, *default)


class ProviderBackend(OIDCAuthenticationBackend):
    """Users are matched by the provider's (issuer, subject), never by a name or an address
    someone could take on at the provider; a first sign-in makes the account."""

    get_settings = staticmethod(setting)

    def __init__(self, *args, **kwargs):
        # Read the provider's settings at a sign-in, not whenever Django lists its backends:
        # a password sign-in must not depend on the provider being configured or up.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if request is None or "nonce" not in kwargs or not configured():
            return None  # only the callback below signs in through the provider
        super().__init__()
        self.id_claims = {}
        return super().authenticate(request, **kwargs)

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)
        if str(payload.get("iss", "")).rstrip("/") != issuer():
            raise Refused("the sign-in was issued by another provider")
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if settings.QP_OIDC_CLIENT_ID not in audiences:
            raise Refused("the sign-in was meant for another application")
        self.id_claims = payload
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        # Groups may come in the ID token or from the userinfo endpoint: take both.
        return {**payload, **super().get_userinfo(access_token, id_token, payload)}

    def verify_claims(self, found: dict) -> bool:
        if found.get("sub") != self.id_claims.get("sub"):
            raise Refused("the provider's user information is about someone else")
        return bool(found.get("sub"))

    def filter_users_by_claims(self, found: dict):
        linked = ProviderAccount.objects.filter(issuer=issuer(), subject=str(found["sub"]))
        return self.UserModel.objects.filter(provider_account__in=linked)

    def create_user(self, found: dict):
        username = claims.username_from(found)
        existing = self.UserModel.objects.filter(username=username).first()
        if existing is None:
            user = self.UserModel.objects.create_user(username, email=found.get("email") or "")
        elif _may_link(existing, found):
            user = existing
        else:
            raise Refused(
                f"an account named {username} already exists here and is not linked to this "
                "sign-in; an admin can rename it, or give it your verified e-mail address"
            )
        return self.update_user(user, found)

    def update_user(self, user, found: dict):
        if not user.is_active:
            raise Refused(f"the account {user.get_username()} is deactivated here")
        changes = claims.apply(user, found, issuer())
        if changes:
            log.info("sign-in of %s: %s", user.get_username(), ", ".join(changes))
        return user

    def get_or_create_user(self, access_token, id_token, payload):
        # mozilla-django-oidc turns a refusal here into a silent failure; keep its reason.
        try:
            return super().get_or_create_user(access_token, id_token, payload)
        except SuspiciousOperation as err:
            self.request.sign_in_refused = str(err)
            raise


def _may_link(existing, found: dict) -> bool:
    """A local account is taken over only by its own verified address, and only once."""
    email = found.get("email")
    return bool(
        found.get("email_verified") is True
        and isinstance(email, str)
        and email
        and existing.email.lower() == email.lower()
        and not ProviderAccount.objects.filter(user=existing).exists()
    )


class SignIn(OIDCAuthenticationRequestView):
    """Off to the provider, with a fresh state, nonce and PKCE challenge in the session."""

    get_settings = staticmethod(setting)

    def __init__(self, *args, **kwargs):
        # Not the library's: it reads the endpoint here, where a provider that is down
        # could only raise; get() reads it and can answer with the reason.
        View.__init__(self, *args, **kwargs)

    def get(self, request):
        if not configured():
            raise Http404("single sign-on is not configured")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except (requests.RequestException, ValueError, KeyError) as err:
            log.warning("the identity provider's discovery failed: %s", err)
            return refused_page(request, "the identity provider did not answer; try again", 502)
        except SuspiciousOperation as err:
            return refused_page(request, str(err), 502)
        self.OIDC_RP_CLIENT_ID = settings.QP_OIDC_CLIENT_ID
        return super().get(request)


class Callback(OIDCAuthenticationCallbackView):
    get_settings = staticmethod(setting)

    def get(self, request):
        if not configured():
            raise Http404("single sign-on is not configured")
        try:
            return super().get(request)
        except requests.RequestException as err:
            log.warning("the identity provider did not answer: %s", err)
            return refused_page(request, "the identity provider did not answer; try again", 502)
        except SuspiciousOperation as err:
            return refused_page(request, in_words(str(err)), 400)

    def login_failure(self):
        request = self.request
        reason = getattr(request, "sign_in_refused", None)
        if error := request.GET.get("error"):
            reason = request.GET.get("error_description") or error
        return refused_page(request, reason or "the identity provider did not sign you in", 403)


# mozilla-django-oidc's refusals, as a person reads them.
_IN_WORDS = {
    "JWT Nonce verification failed": (
        "the provider's answer was not made for this sign-in (its nonce does not match); "
        "start again"
    ),
    "OIDC callback state not found": (
        "this sign-in was not started in this browser, or was already used (unknown state); "
        "start again"
    ),
    "JWS token verification failed": "the provider's signature on the sign-in does not check",
}


def in_words(message: str) -> str:
    return next((words for start, words in _IN_WORDS.items() if message.startswith(start)), message)


def refused_page(request, reason: str, status: int):
    reason = reason[:300]
    audit.refused(request, "single sign-on", reason=reason)
    context = login_context(request, refused=reason, form=AuthenticationForm(request))
    return render(request, "registration/login.html", context, status=status)


def login_context(request, **extra) -> dict:
    return {
        "sso": configured(),
        "sso_name": settings.QP_OIDC_NAME,
        "local_login": settings.QP_LOCAL_LOGIN,
        **extra,
    }
