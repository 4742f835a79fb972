"""Sign-ins, sign-outs and refused sign-ins in the audit log, whichever way people come in."""

from __future__ import annotations

from quotaportal.quotas.audit import record
from quotaportal.quotas.models import EventKind

PROVIDER_BACKEND = "quotaportal.identity.oidc.ProviderBackend"


def address(request) -> str | None:
    return request.META.get("REMOTE_ADDR") if request is not None else None


def method_of(user) -> str:
    """How the user proved who they are: Django's login() leaves the backend's path on them."""
    return "single sign-on" if getattr(user, "backend", "") == PROVIDER_BACKEND else "password"


def signed_in(sender, request, user, **kwargs) -> None:
    record(user, EventKind.SIGNED_IN, method=method_of(user), address=address(request))


def signed_out(sender, request, user, **kwargs) -> None:
    if user is not None:  # a sign-out without a session signs nobody out
        record(user, EventKind.SIGNED_OUT, address=address(request))


def password_refused(sender, credentials, request=None, **kwargs) -> None:
    # Django hands over the credentials with the password already masked.
    refused(request, "password", username=str(credentials.get("username", ""))[:150])


def refused(request, method: str, reason: str = "wrong username or password", **detail) -> None:
    record(
        None,
        EventKind.SIGN_IN_REFUSED,
        method=method,
        reason=reason,
        address=address(request),
        **detail,
    )
