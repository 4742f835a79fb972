"""Job arrays: the list (each with its children's counts), one array's page, and its priority
and termination, which act on every child not final."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from quotaportal.quotas import selectors, services
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import JobArray, JobStatus
from quotaportal.quotas.permissions import can_change_job
from quotaportal.web.forms.jobs import PriorityForm, TerminateForm
from quotaportal.web.views.common import forbid_on, paginate

OPEN = (JobStatus.PENDING, JobStatus.RUNNABLE, JobStatus.SCHEDULED, JobStatus.STARTING)


def _arrays():
    return JobArray.objects.select_related("job_queue", "submitted_by").order_by(
        "-created_at", "id"
    )


def _with_counts(arrays) -> None:
    counts = selectors.array_counts([a.pk for a in arrays])
    for array in arrays:
        array.counts = counts[array.pk]
        array.shown_counts = [(s, n) for s, n in array.counts.items() if n]
        array.open = sum(array.counts[s] for s in (*OPEN, JobStatus.RUNNING))


@login_required
def array_list(request):
    page = paginate(request, _arrays())
    _with_counts(page.object_list)
    return render(request, "web/arrays.html", {"page": page})


@login_required
def array_detail(request, pk, form=None, status=200):
    array = get_object_or_404(_arrays(), pk=pk)
    _with_counts([array])
    first = array.children.select_related("quota_share").first()
    context = {
        "array": array,
        "can_change": first is not None and can_change_job(request.user, first),
        "priority_form": form or PriorityForm(),
        "terminate_form": TerminateForm(),
    }
    return render(request, "web/array_detail.html", context, status=status)


@login_required
@require_POST
def array_priority(request, pk):
    array = get_object_or_404(JobArray, pk=pk)
    form = PriorityForm(request.POST)
    if form.is_valid():
        priority = form.cleaned_data["scheduling_priority"]
        try:
            changed = services.set_array_priority(request.user, array, priority)
        except Forbidden as err:
            forbid_on(err)
        except (InvalidInput, Conflict) as err:
            messages.error(request, err.message)
        else:
            messages.success(request, f"{array.name}: priority {priority} for {changed} jobs.")
            return redirect("array-detail", pk=array.pk)
    return array_detail(request, pk, form=form, status=400)


@login_required
@require_POST
def array_terminate(request, pk):
    array = get_object_or_404(JobArray, pk=pk)
    form = TerminateForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else "Terminated by user"
    try:
        ended = services.terminate_array(request.user, array, reason)
    except Forbidden as err:
        forbid_on(err)
    except (InvalidInput, Conflict) as err:
        messages.error(request, err.message)
    else:
        messages.success(request, f"Terminated {ended} jobs of {array.name}.")
    return redirect("array-detail", pk=array.pk)
