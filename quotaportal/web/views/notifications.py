"""Webhooks in the admin console, with each one's recent deliveries; and a person's choice of
e-mail about their own jobs."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render

from quotaportal.notifications import services
from quotaportal.notifications.models import Webhook
from quotaportal.quotas.errors import InvalidInput
from quotaportal.web.forms.common import show_service_errors
from quotaportal.web.forms.notifications import (
    EmailPreferenceForm,
    WebhookEditForm,
    WebhookForm,
    webhook_fields,
)
from quotaportal.web.views.manage.common import (
    AdminDeleteView,
    ListWithForm,
    page,
    require_admin,
    saved,
    succeed,
)

RECENT_DELIVERIES = 50


class WebhooksView(ListWithForm):
    form_class = WebhookForm
    template_name = "web/manage_webhooks.html"

    def rows(self) -> dict:
        return {"webhooks": Webhook.objects.prefetch_related("job_queues", "teams")}

    def create(self, data: dict):
        return services.create_webhook(self.request.user, **webhook_fields(data))

    def created(self, webhook):
        message = f"Created webhook {webhook.name}: events from now on are sent to it."
        return succeed(self.request, message, "manage-webhook", webhook.pk)


webhooks = WebhooksView.as_view()


def _initial(webhook: Webhook) -> dict:
    return {
        "name": webhook.name,
        "url": webhook.url,
        "format": webhook.format,
        "detail_types": webhook.detail_types,
        "job_queues": list(webhook.job_queues.all()),
        "teams": list(webhook.teams.all()),
        "enabled": webhook.enabled,
    }


@login_required
def webhook(request, pk):
    require_admin(request)
    hook = get_object_or_404(Webhook, pk=pk)
    form = WebhookEditForm(request.POST or None, initial=_initial(hook))
    if request.method == "POST":
        done = saved(
            form, lambda data: services.update_webhook(request.user, hook, **webhook_fields(data))
        )
        if done is not None:
            return succeed(request, f"Saved webhook {hook.name}.", "manage-webhook", hook.pk)
    deliveries = list(hook.deliveries.select_related("event__job")[:RECENT_DELIVERIES])
    for delivery in deliveries:
        delivery.job_status = _status_sent(delivery.body)
    context = {"webhook": hook, "form": form, "deliveries": deliveries}
    return page(request, "web/manage_webhook.html", context, failed=bool(form.errors))


def _status_sent(body: str) -> str:
    """The job status an EventBridge envelope carried (its `detail.status`); "" for another
    format (Slack's text says it in words)."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return ""
    return str(detail.get("status", "")) if isinstance(detail, dict) else ""


class WebhookDeleteView(AdminDeleteView):
    model, kind, listed = Webhook, "webhook", "manage-webhooks"

    def delete(self, obj) -> None:
        services.delete_webhook(self.request.user, obj)


webhook_delete = WebhookDeleteView.as_view()


@login_required
def email_preferences(request):
    preference = services.email_preference(request.user)
    initial = {
        "on_preempted": preference.on_preempted,
        "on_failed": preference.on_failed,
        "on_succeeded": preference.on_succeeded,
    }
    form = EmailPreferenceForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.set_email_preference(request.user, **form.cleaned_data)
        except InvalidInput as err:
            show_service_errors(form, err)
        else:
            messages.success(request, "Saved: you get e-mail as ticked.")
            return redirect("account-notifications")
    status = 400 if form.errors else 200
    context = {"form": form, "address": request.user.email}
    return render(request, "web/account_notifications.html", context, status=status)
