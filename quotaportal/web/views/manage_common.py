"""What every admin-console view shares: the admin check and running a service for a form."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render

from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput, ServiceError
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.web.forms import in_plain_words, show_service_errors
from quotaportal.web.views.common import forbid_on


def require_admin(request) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("only admins can use the admin console")


def saved(form, call: Callable[[dict], object]):
    """Run the service with the form's cleaned data; its refusals go next to the fields.
    The service's result, or None when the form or the service refused."""
    if not form.is_valid():
        return None
    try:
        return call(form.cleaned_data)
    except Forbidden as err:
        forbid_on(err)
    except (InvalidInput, Conflict) as err:
        show_service_errors(form, err)
    return None


def page(request, template: str, context: dict, *, failed: bool = False):
    """A console page; 400 when it shows a form the user sent with mistakes."""
    return render(request, template, context, status=400 if failed else 200)


def act(request, call: Callable[[], object], done: str, back: str, *args):
    """A POST button (no form fields): run it, say what happened, go back."""
    try:
        call()
    except Forbidden as err:
        forbid_on(err)
    except ServiceError as err:
        messages.error(request, in_plain_words(err.message))
        return redirect(back, *args)
    messages.success(request, done)
    return redirect(back, *args)
