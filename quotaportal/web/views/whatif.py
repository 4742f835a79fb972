"""What-if pages: draft share changes, replay them beside today's settings, apply or discard.

Admins draft, run, apply and discard; every signed-in user may look at the replays.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from quotaportal.quotas.errors import Conflict, Forbidden, InvalidInput
from quotaportal.quotas.models import JobQueue, WhatIf
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.usage import fairness as usage_fairness
from quotaportal.web.charts import replay_chart
from quotaportal.web.forms.whatif import WhatIfForm
from quotaportal.web.views.common import forbid_on
from quotaportal.web.whatif_explained import better, draft_changes, verdict, worse
from quotaportal.whatif import runs as whatif


@login_required
def what_if_index(request):
    return render(
        request,
        "web/whatif_index.html",
        {
            "queues": JobQueue.objects.order_by("name"),
            "runs": WhatIf.objects.select_related("job_queue", "created_by")[:20],
            "is_admin": is_platform_admin(request.user),
        },
    )


@login_required
def what_if_draft(request, queue_id: int):
    if not is_platform_admin(request.user):
        raise PermissionDenied("only admins draft share changes; you may view the replays")
    queue = get_object_or_404(JobQueue.objects.select_related("service_environment"), pk=queue_id)
    today = whatif.draft_of(queue)
    form = WhatIfForm(request.POST or None, draft=today, whole_trace=whatif.whole_trace_here())
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid() and (draft := form.draft()) is not None:
            for entry, before in zip(draft["shares"], today["shares"], strict=False):
                entry["team"] = before["team"]
            try:
                run = whatif.start_what_if(
                    request.user,
                    queue,
                    draft,
                    form.cleaned_data["source"],
                    form.cleaned_data["since_hours"],
                )
            except Forbidden as err:
                forbid_on(err)
            except InvalidInput as err:
                form.show_draft_errors(err.errors)
            else:
                return redirect("what-if-run", run.pk)
    return render(request, "web/whatif_draft.html", {"queue": queue, "form": form}, status=status)


@login_required
def what_if_run(request, pk):
    run = get_object_or_404(WhatIf.objects.select_related("job_queue", "created_by"), pk=pk)
    context = {"run": run, "is_admin": is_platform_admin(request.user)}
    if run.result:
        context["sides"] = _sides(run)
        today = run.result.get("today_config") or whatif.draft_of(run.job_queue)
        context["changes"] = draft_changes(today, run.draft)
        context["verdict"] = verdict(run.result["today"], run.result["draft"])
        context["worse"] = worse(run.result["today"], run.result["draft"])
    template = "web/whatif_run.html"
    if request.htmx:
        template += "#live"
    return render(request, template, context)


def _sides(run: WhatIf) -> list[dict]:
    """Today and the draft, each with its chart and per-share rows, for the side-by-side view."""
    result = run.result
    span = max(
        (point["t"] for side in ("today", "draft") for point in result[side]["series"]),
        default=0.0,
    )
    # One scale for both charts, so a glance compares them.
    top = max(result[side]["capacity_total"] for side in ("today", "draft"))
    sides = []
    for key, title in (("today", "Today's settings"), ("draft", "The draft")):
        summary = result[key]
        sides.append(
            {
                "key": key,
                "title": title,
                "summary": summary,
                "chart": replay_chart(summary["series"], top, span),
                "shares": sorted(summary["shares"].items()),
                "marks": _marks(result["today"], summary) if key == "draft" else {},
            }
        )
    return sides


MARKED = (
    "makespan_s",
    "wait_p50_s",
    "wait_p90_s",
    "wait_p99_s",
    "preemptions",
    "idle_instance_hours_while_waiting",
)


def _marks(today: dict, draft: dict) -> dict[str, str]:
    """Which of the draft's figures are better or worse than today's (all: lower is better)."""
    return {name: better(today.get(name), draft.get(name)) for name in MARKED}


@login_required
@require_POST
def what_if_apply(request, pk):
    run = get_object_or_404(WhatIf, pk=pk)
    try:
        usage_fairness.apply_what_if(request.user, run)
    except Forbidden as err:
        forbid_on(err)
    except (Conflict, InvalidInput) as err:
        messages.error(request, f"Not applied: {err.message}")
    else:
        messages.success(request, f"The draft is now queue {run.job_queue.name}'s settings.")
    return redirect("what-if-run", run.pk)


@login_required
@require_POST
def what_if_discard(request, pk):
    run = get_object_or_404(WhatIf, pk=pk)
    try:
        whatif.discard_what_if(request.user, run)
    except Forbidden as err:
        forbid_on(err)
    except Conflict as err:
        messages.error(request, err.message)
        return redirect("what-if-run", run.pk)
    messages.info(request, "Draft discarded.")
    return redirect("what-if")
