"""Quota share administration (admins only): list, create, edit, disable, delete, and
answering drift of a share mirrored into AWS Batch."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from quotaportal.awsbatch.sync import drift as aws_drift
from quotaportal.quotas import selectors, services, standings
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import JobQueue, QuotaShare, State
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.web.events import plain_setting
from quotaportal.web.forms.common import show_service_errors
from quotaportal.web.forms.shares import ShareForm
from quotaportal.web.views.common import forbid_on


def _require_admin(request) -> None:
    if not is_platform_admin(request.user):
        raise PermissionDenied("only admins can manage quota shares")


@login_required
def share_list(request):
    _require_admin(request)
    queues = list(
        JobQueue.objects.order_by("name")
        .select_related("service_environment", "tick_memo")  # standings read the memo
        .prefetch_related("quota_shares__team")
    )
    utilization = {q.pk: selectors.share_utilization(q) for q in queues}
    for queue in queues:
        queue.overcommitted = selectors.overcommitted_units(queue)
        queue.standings = standings.share_standings(queue)
    return render(request, "web/shares.html", {"queues": queues, "utilization": utilization})


def _save(request, form: ShareForm, share: QuotaShare | None):
    limits = form.capacity_limits_value()
    if form.errors:
        return None
    data = form.cleaned_data
    fields = {
        "team": data["team"],
        "capacity_limits": limits,
        "sharing_strategy": data["sharing_strategy"],
        "borrow_limit": data["borrow_limit"],
        "in_share_preemption": data["in_share_preemption"],
        "state": data["state"],
        "fair_share_weight": 1.0
        if data["fair_share_weight"] is None
        else data["fair_share_weight"],
    }
    try:
        if share is None:
            return services.create_share(
                request.user, job_queue=data["job_queue"], name=data["name"], **fields
            )
        return services.update_share(request.user, share, **fields)
    except Forbidden as err:
        forbid_on(err)
    except (InvalidInput, Conflict) as err:
        show_service_errors(form, err)
    return None


def _or_one(weight: float | None) -> float:
    return 1.0 if weight is None else weight


@login_required
def share_edit(request, pk=None):
    _require_admin(request)
    share = (
        get_object_or_404(QuotaShare.objects.select_related("job_queue", "team"), pk=pk)
        if pk
        else None
    )
    # A queue page's "New quota share" link names the queue to start with.
    initial = ShareForm.initial_for(share) if share else {"job_queue": request.GET.get("job_queue")}
    form = ShareForm(request.POST or None, initial=initial, editing=share)
    if request.method == "POST" and form.is_valid():
        saved = _save(request, form, share)
        if saved is not None:
            messages.success(request, f"Saved quota share {saved.name}.")
            return redirect("share-list")
    status = 400 if request.method == "POST" else 200
    drift = aws_drift.drift_of(share) if share else None
    context = {
        "form": form,
        "share": share,
        "drift": drift,
        "drift_rows": [
            (field.replace("_", " "), plain_setting(portal), plain_setting(aws))
            for field, portal, aws in (aws_drift.drift_rows(share, drift) if drift else [])
        ],
    }
    return render(request, "web/share_form.html", context, status=status)


@login_required
@require_POST
def share_drift(request, pk):
    """Keep the portal's value or adopt AWS's, for a share changed in the AWS console."""
    _require_admin(request)
    share = get_object_or_404(QuotaShare.objects.select_related("job_queue"), pk=pk)
    decision = request.POST.get("decision", "")
    try:
        aws_drift.resolve_drift(request.user, share, decision)
    except (InvalidInput, Conflict) as err:
        messages.error(request, err.message)
        return redirect("share-edit", share.pk)
    if decision == "adopt":
        messages.success(request, f"Adopted AWS's values for quota share {share.name}.")
    else:
        messages.success(
            request, f"Kept the portal's values; the next sync pushes them to AWS for {share.name}."
        )
    return redirect("share-edit", share.pk)


@login_required
@require_POST
def share_toggle(request, pk):
    _require_admin(request)
    share = get_object_or_404(QuotaShare, pk=pk)
    state = State.DISABLED if share.state == State.ENABLED else State.ENABLED
    services.update_share(request.user, share, state=state)
    messages.success(request, f"Quota share {share.name} is now {state}.")
    return redirect("share-list")


@login_required
@require_POST
def share_delete(request, pk):
    _require_admin(request)
    share = get_object_or_404(QuotaShare, pk=pk)
    try:
        services.delete_share(request.user, share)
    except Conflict as err:
        messages.error(request, err.message)
        return redirect("share-list")
    messages.success(
        request, f"Deleted quota share {share.name}; its unfinished jobs were terminated."
    )
    return redirect("share-list")
