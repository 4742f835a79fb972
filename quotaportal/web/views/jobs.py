"""Jobs: list with filters, submit, detail with timeline, priority and termination."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRefresh

from quotaportal.awsbatch.models import RemoteJob
from quotaportal.jobs import output
from quotaportal.jobs.filters import JobFilter
from quotaportal.quotas import selectors, services, standings
from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import Backend, Job, JobQueue, JobStatus, QuotaShare
from quotaportal.quotas.permissions import can_change_job, can_read_output
from quotaportal.quotas.reasons import DEPENDENCY_WORDS, PLAIN_REASONS, SHORT_REASONS
from quotaportal.web.events import describe
from quotaportal.web.forms.common import show_service_errors
from quotaportal.web.forms.jobs import JobSubmitForm, OutputForm, PriorityForm, TerminateForm
from quotaportal.web.views.common import forbid_on, paginate, query_without_page
from quotaportal.whatif import estimates


def _decorate(user, jobs) -> None:
    positions = selectors.job_positions(jobs)
    for job in jobs:
        job.can_change = can_change_job(user, job) and not job.is_final
        job.position_in_share, job.position_in_queue = positions.get(job.pk, (None, None))
        job.reason_short = SHORT_REASONS.get(job.pending_reason, job.pending_reason)


SORTS = [
    ("", "newest first"),
    ("submitted", "oldest first"),
    ("-priority", "highest priority first"),
    ("priority", "lowest priority first"),
    ("status", "by status"),
]


LIST_REFRESH_SECONDS = 5


def _submitters(user) -> list[str]:
    """Who submitted the jobs this person may see, for the "submitted by" filter's choices."""
    return list(
        selectors.visible_jobs(user)
        .exclude(submitted_by=None)
        .order_by("submitted_by__username")
        .values_list("submitted_by__username", flat=True)
        .distinct()[:200]
    )


@login_required
def job_list(request):
    jobs = selectors.visible_jobs(request.user).order_by("-created_at", "id")
    filters = JobFilter(request.GET, queryset=jobs, request=request)  # as /api/v1/jobs/ has
    page = paginate(request, filters.qs if filters.is_valid() else jobs.none())
    _decorate(request.user, page.object_list)
    # The rows refresh themselves (not while a priority box in them has the focus).
    template = "web/jobs.html#rows" if request.htmx else "web/jobs.html"
    return render(
        request,
        template,
        {
            "refresh_seconds": LIST_REFRESH_SECONDS,
            "users": _submitters(request.user),
            "page": page,
            "filters": request.GET,
            "filter_errors": filters.errors,
            "sorts": SORTS,
            "query": query_without_page(request),
            "queues": JobQueue.objects.order_by("name").values_list("name", flat=True),
            "shares": QuotaShare.objects.order_by("name").values_list("name", flat=True).distinct(),
            "statuses": JobStatus.values,
            "estimate_assumes": estimates.ASSUMPTION,
        },
    )


@login_required
def job_submit(request):
    form = JobSubmitForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        data = dict(form.cleaned_data)
        share = data.pop("quota_share")
        try:
            job = services.submit_job(
                request.user,
                job_queue=share.job_queue,
                quota_share=share.name,
                capacity_unit=data.pop("capacity_unit").name,
                **data,
            )
        except Forbidden as err:
            forbid_on(err)
        except (InvalidInput, Conflict) as err:
            show_service_errors(form, err)
        else:
            messages.success(request, f"Submitted {job.name}.")
            return redirect("job-detail", pk=job.pk)
    status = 400 if request.method == "POST" else 200
    return render(request, "web/job_submit.html", {"form": form}, status=status)


def _detail_context(request, job: Job, form: PriorityForm | None = None) -> dict:
    _decorate(request.user, [job])
    aws = job.job_queue.service_environment.backend == Backend.AWS_BATCH
    return {
        "job": job,
        "aws": aws,
        "remote": RemoteJob.objects.filter(job=job).first() if aws else None,
        "reason_text": PLAIN_REASONS.get(job.pending_reason, ""),
        "fair_share_text": standings.waiting_reason(job, {}),
        "dependencies": [
            {**d, "words": DEPENDENCY_WORDS[d["type"]]} for d in selectors.dependencies(job)
        ],
        "estimate_assumes": estimates.ASSUMPTION,
        "events": describe(job.events.select_related("actor", "share").order_by("time", "id")),
        "attempts": job.attempts.select_related("host", "slurm").prefetch_related(
            "placements__host"
        ),
        "can_read_output": can_read_output(request.user, job),
        "priority_form": form
        or PriorityForm(initial={"scheduling_priority": job.scheduling_priority}),
        "terminate_form": TerminateForm(),
    }


@login_required
def job_detail(request, pk):
    job = get_object_or_404(selectors.visible_jobs(request.user), pk=pk)
    context = _detail_context(request, job)
    # Status, reason, position, timeline and attempts refresh together while the job is live.
    template = "web/job_detail.html#live" if request.htmx else "web/job_detail.html"
    return render(request, template, context)


@login_required
@require_POST
def job_priority(request, pk):
    job = get_object_or_404(Job, pk=pk)
    form = PriorityForm(request.POST)
    status, done = 400, ""
    if form.is_valid():
        priority = form.cleaned_data["scheduling_priority"]
        try:
            services.set_priority(request.user, job, priority)
        except Forbidden as err:
            forbid_on(err)
        except (InvalidInput, Conflict) as err:
            show_service_errors(form, err)
            status = err.status
        else:
            status, done = 200, f"Priority set to {priority}."
    job = get_object_or_404(selectors.visible_jobs(request.user), pk=pk)
    if not request.htmx:
        if status == 200:
            messages.success(request, f"{job.name}: {done}")
            return redirect("job-detail", pk=job.pk)
        # Without htmx, a bad value shows the whole job page with the error by its field.
        return render(
            request, "web/job_detail.html", _detail_context(request, job, form), status=status
        )
    _decorate(request.user, [job])
    response = render(
        request,
        "web/job_detail.html#priority",
        {"job": job, "priority_form": form, "done": done},
        status=status,
    )
    if done:
        response["HX-Trigger"] = "job-changed"  # the job page's live part refreshes now
    return response


@login_required
@require_POST
def job_terminate(request, pk):
    job = get_object_or_404(Job, pk=pk)
    form = TerminateForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else "Terminated by user"
    try:
        services.terminate_job(request.user, job, reason)
    except Forbidden as err:
        forbid_on(err)
    except Conflict as err:
        messages.error(request, err.message)
    else:
        messages.success(request, f"Terminated {job.name}.")
    return HttpResponseClientRefresh() if request.htmx else redirect("job-detail", pk=job.pk)


@login_required
def job_output(request, pk):
    """The job's whole output for the job page to follow (as GET /api/v1/jobs/{id}/logs/
    answers), or, with ?download=1, all of it as a file."""
    job = get_object_or_404(selectors.visible_jobs(request.user), pk=pk)
    if not can_read_output(request.user, job):
        raise PermissionDenied("a job's output is for its team, its submitter and admins")
    form = OutputForm(request.GET)
    if not form.is_valid():
        return HttpResponseBadRequest(" ".join(m for ms in form.errors.values() for m in ms))
    where = {"attempt": form.cleaned_data["attempt"], "rank": form.cleaned_data["rank"] or 0}
    if form.cleaned_data["download"]:
        response = StreamingHttpResponse(
            output.whole_output(job, **where), content_type="text/plain; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="{job.name}-output.log"'
        return response
    read = output.read_output(job, offset=form.cleaned_data["offset"] or 0, **where)
    return HttpResponse(read.data, content_type="text/plain; charset=utf-8", headers=read.headers())
