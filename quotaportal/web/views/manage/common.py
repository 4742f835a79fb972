"""What every admin-console view shares: the admin check and running a service for a form."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from quotaportal.quotas import services
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput, ServiceError
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.web.forms.common import in_plain_words, show_service_errors
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


class AdminView(LoginRequiredMixin, View):
    """A console view: signed-in admins only (403 for anyone else)."""

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated:
            require_admin(request)
        return super().dispatch(request, *args, **kwargs)


class ListWithForm(AdminView):
    """A console list page with its creation form. A POST creates through `create` and
    answers `created`; a GET, or a refusal shown next to the fields, renders the page."""

    form_class: type
    template_name: str

    def rows(self) -> dict:
        """What the page lists (the template's context besides the form)."""
        raise NotImplementedError

    def create(self, data: dict):
        """Call the service that creates the object; its refusals go next to the fields."""
        raise NotImplementedError

    def created(self, obj):
        """The answer once created: a message and where to go next."""
        raise NotImplementedError

    def get(self, request):
        return page(request, self.template_name, {**self.rows(), "form": self.form_class()})

    def post(self, request):
        form = self.form_class(request.POST)
        obj = saved(form, self.create)
        if obj is not None:
            return self.created(obj)
        return page(request, self.template_name, {**self.rows(), "form": form}, failed=True)


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


class AdminDeleteView(AdminView):
    """A POST deleting one row through `delete`: back to the list when done, or, refused
    (with the service's reason), to the object's page when it has one."""

    http_method_names = ["post"]
    model: type
    kind: str  # in words, for the message
    listed: str  # the list's URL name
    detail: str | None = None  # the object's page, if it has one

    def delete(self, obj) -> None:
        services.delete_resource(self.request.user, obj, self.kind)

    def post(self, request, pk):
        obj = get_object_or_404(self.model, pk=pk)
        done = f"Deleted {self.kind} {obj.name}."
        outcome = act(request, partial(self.delete, obj), done, self.listed)
        if self.detail and self.model.objects.filter(pk=pk).exists():
            return redirect(self.detail, pk)
        return outcome
