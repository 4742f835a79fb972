"""What every admin-console view shares: the admin check and running a service for a form."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

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


def succeed(request, message: str, to: str, *args):
    messages.success(request, message)
    return redirect(to, *args)


def list_with_form(request, form, create, done, template: str, context: Callable[[], dict]):
    """A console list page with its creation form. A POST creates through `create(cleaned
    data)` and answers `done(created)`; a GET, or a refusal shown next to the fields, renders
    `template` with `context()` and the form."""
    if request.method == "POST":
        created = saved(form, create)
        if created is not None:
            return done(created)
    return page(request, template, {**context(), "form": form}, failed=request.method == "POST")


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


def deleter(model, kind: str, delete: Callable, listed: str, detail: str | None = None):
    """A POST view deleting one `model` row through `delete(actor, obj)`: back to the list
    when done, or, refused (with the service's reason), to the object's page when it has one."""

    @require_POST
    @login_required
    def view(request, pk):
        require_admin(request)
        obj = get_object_or_404(model, pk=pk)
        outcome = act(
            request, lambda: delete(request.user, obj), f"Deleted {kind} {obj.name}.", listed
        )
        if detail and model.objects.filter(pk=pk).exists():
            return redirect(detail, pk)
        return outcome

    return view
