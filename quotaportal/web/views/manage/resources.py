"""Admin console, capacity: units, service environments with their reservations, scheduling
policies and job queues. Every write goes through the services (validated, audited)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from quotaportal.awsbatch.sync.client import Refused, Unavailable
from quotaportal.awsbatch.sync.importer import import_queue
from quotaportal.quotas import selectors, services, standings
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    JobQueue,
    Reservation,
    SchedulingPolicy,
    ServiceEnvironment,
    Team,
)
from quotaportal.quotas.services import queues as queue_services
from quotaportal.quotas.services import reservations, resources
from quotaportal.tick import bridge
from quotaportal.usage import fairness as usage_fairness
from quotaportal.web.forms.common import unit_counts_text
from quotaportal.web.forms.manage import (
    AWS_FIELDS,
    AwsImportForm,
    EnvironmentEditForm,
    EnvironmentForm,
    PolicyForm,
    QueueForm,
    QueueSettingsForm,
    ReservationForm,
    UnitEditForm,
    UnitForm,
    pop_fair_share,
)
from quotaportal.web.views.manage.common import (
    AdminDeleteView,
    ListWithForm,
    act,
    page,
    require_admin,
    saved,
    succeed,
)


@login_required
def index(request):
    require_admin(request)
    counts = {
        "teams": Team.objects.count(),
        "users": get_user_model().objects.count(),
        "units": CapacityUnit.objects.count(),
        "environments": ServiceEnvironment.objects.count(),
        "policies": SchedulingPolicy.objects.count(),
        "queues": JobQueue.objects.count(),
    }
    return page(request, "web/manage_index.html", {"counts": counts})


# -- capacity units ------------------------------------------------------------------------


class UnitsView(ListWithForm):
    form_class = UnitForm
    template_name = "web/manage_units.html"

    def rows(self) -> dict:
        return {"units": CapacityUnit.objects.order_by("name")}

    def create(self, data: dict):
        return services.create_capacity_unit(self.request.user, **data)

    def created(self, unit):
        return succeed(self.request, f"Created capacity unit {unit.name}.", "manage-units")


units = UnitsView.as_view()


@login_required
def unit(request, pk):
    require_admin(request)
    unit = get_object_or_404(CapacityUnit, pk=pk)
    initial = {"gpus_per_unit": unit.gpus_per_unit, "description": unit.description}
    form = UnitEditForm(request.POST or None, initial=initial)
    if request.method == "POST":
        done = saved(
            form,
            lambda d: resources.update_capacity_unit(
                request.user, unit, gpus_per_unit=d["gpus_per_unit"], description=d["description"]
            ),
        )
        if done is not None:
            messages.success(request, f"Saved capacity unit {unit.name}.")
            return redirect("manage-units")
    return page(
        request, "web/manage_unit.html", {"unit": unit, "form": form}, failed=bool(form.errors)
    )


class UnitDeleteView(AdminDeleteView):
    model, kind, listed = CapacityUnit, "capacity unit", "manage-units"


unit_delete = UnitDeleteView.as_view()


# -- service environments and reservations --------------------------------------------------


class EnvironmentsView(ListWithForm):
    form_class = EnvironmentForm
    template_name = "web/manage_environments.html"

    def rows(self) -> dict:
        return {"environments": _environments_with_capacity()}

    def create(self, data: dict):
        return services.create_service_environment(self.request.user, **data)

    def created(self, env):
        message = f"Created service environment {env.name}."
        return succeed(self.request, message, "manage-environment", env.pk)


environments = EnvironmentsView.as_view()


def _environments_with_capacity() -> list:
    rows = list(
        ServiceEnvironment.objects.order_by("name").annotate(queue_count=Count("job_queues"))
    )
    for env in rows:
        env.capacity = bridge.capacity_now(env)
    return rows


@login_required
def environment(request, pk):
    require_admin(request)
    env = get_object_or_404(ServiceEnvironment, pk=pk)
    which = request.POST.get("form")
    aws = env.backend == Backend.AWS_BATCH
    edit = EnvironmentEditForm(
        request.POST if which == "edit" else None,
        initial={
            "capacity_limits": unit_counts_text(bridge.environment_limits(env)),
            "state": env.state,
            **{name: getattr(env, name) for name in AWS_FIELDS},
        },
        prefix="edit",
        aws=aws,
    )
    reserve = ReservationForm(request.POST if which == "reserve" else None, prefix="reserve")
    importing = AwsImportForm(request.POST if which == "import" else None, prefix="import")
    if request.method == "POST":
        if which == "edit":
            done = saved(
                edit, lambda d: services.update_service_environment(request.user, env, **d)
            )
            message = f"Saved service environment {env.name}."
        elif which == "import" and aws:
            done = saved(importing, lambda d: _import(request.user, env, d["job_queue"]))
            message = "Imported the job queue from AWS Batch; the portal now syncs it."
        else:
            done = saved(
                reserve,
                lambda d: reservations.create_reservation(request.user, env, **d),
            )
            message = "Reserved the capacity; the scheduler sees it at the window's start."
        if done is not None:
            messages.success(request, message)
            return redirect("manage-environment", env.pk)
    return page(
        request,
        "web/manage_environment.html",
        {**environment_context(env), "edit": edit, "reserve": reserve, "importing": importing},
        failed=request.method == "POST",
    )


def _import(actor, env: ServiceEnvironment, job_queue: str):
    """The environment page's import: the same as manage.py aws_import, with its connection."""
    try:
        return import_queue(
            actor,
            job_queue,
            region=env.region,
            endpoint_url=env.endpoint_url,
            aws_profile=env.aws_profile,
        )
    except (Unavailable, Refused) as err:
        raise InvalidInput(
            {"job_queue": f"AWS Batch answered: {err}; nothing was imported"}
        ) from None


def environment_context(env: ServiceEnvironment) -> dict:
    now = timezone.now()
    queues = list(env.job_queues.order_by("-priority", "name"))
    return {
        "env": env,
        "connection": selectors.connection_health(env),
        "capacity": selectors.environment_capacity(env, now),
        "base": bridge.environment_limits(env),
        "reservations": env.reservations.select_related("capacity_unit").order_by("starts_at"),
        "upcoming": selectors.upcoming_capacity_changes(env, now),
        "queues": queues,
        "overcommitted": {q.name: selectors.overcommitted_units(q) for q in queues},
        "now": now,
    }


class EnvironmentDeleteView(AdminDeleteView):
    model, kind = ServiceEnvironment, "service environment"
    listed, detail = "manage-environments", "manage-environment"


environment_delete = EnvironmentDeleteView.as_view()


@require_POST
@login_required
def reservation_cancel(request, pk):
    require_admin(request)
    reservation = get_object_or_404(Reservation.objects.select_related("environment"), pk=pk)
    env_id = reservation.environment_id
    return act(
        request,
        lambda: reservations.cancel_reservation(request.user, reservation),
        f"Cancelled reservation {reservation.name}.",
        "manage-environment",
        env_id,
    )


# -- scheduling policies -------------------------------------------------------------------


class PoliciesView(ListWithForm):
    form_class = PolicyForm
    template_name = "web/manage_policies.html"

    def rows(self) -> dict:
        policies = SchedulingPolicy.objects.annotate(queue_count=Count("jobqueue"))
        return {"policies": policies.order_by("name")}

    def create(self, data: dict):
        return services.create_scheduling_policy(self.request.user, **data)

    def created(self, policy):
        message = f"Created scheduling policy {policy.name}."
        return succeed(self.request, message, "manage-policies")


policies = PoliciesView.as_view()


class PolicyDeleteView(AdminDeleteView):
    model, kind, listed = SchedulingPolicy, "scheduling policy", "manage-policies"


policy_delete = PolicyDeleteView.as_view()


# -- job queues ----------------------------------------------------------------------------


class QueuesView(ListWithForm):
    form_class = QueueForm
    template_name = "web/manage_queues.html"

    def rows(self) -> dict:
        queues = JobQueue.objects.select_related("service_environment", "scheduling_policy")
        return {"queues": queues.annotate(share_count=Count("quota_shares")).order_by("name")}

    def create(self, data: dict):
        policy = pop_fair_share(data)
        queue = services.create_job_queue(self.request.user, **data)
        if policy["half_life_seconds"] is not None:
            queue = usage_fairness.set_policy(self.request.user, queue, **policy)
        return queue

    def created(self, queue):
        message = f"Created job queue {queue.name}. Now add its quota shares."
        return succeed(self.request, message, "manage-queue", queue.pk)


queues = QueuesView.as_view()


QUEUE_SETTINGS = ("scheduling_policy", "priority", "ordering", "preemption_grace_seconds", "state")


@login_required
def queue(request, pk):
    require_admin(request)
    queue = get_object_or_404(
        JobQueue.objects.select_related("service_environment", "scheduling_policy"), pk=pk
    )
    initial = {field: getattr(queue, field) for field in QUEUE_SETTINGS}
    half_life = queue.fair_share_half_life_seconds
    initial["fair_share_half_life_hours"] = half_life // 3600 if half_life else None
    initial["fair_share_counts"] = queue.fair_share_counts
    form = QueueSettingsForm(request.POST or None, initial=initial)
    if request.method == "POST":
        done = saved(form, lambda data: _save_queue(request.user, queue, data))
        if done is not None:
            messages.success(request, f"Saved job queue {queue.name}.")
            return redirect("manage-queue", queue.pk)
    shares = queue.quota_shares.select_related("team").order_by("name")
    context = {
        "queue": queue,
        "form": form,
        "shares": shares,
        "utilization": selectors.share_utilization(queue),
        "overcommitted": selectors.overcommitted_units(queue),
        "standings": standings.share_standings(queue),
        "half_life_words": standings.half_life_words(queue.fair_share_half_life_seconds or 1),
    }
    return page(request, "web/manage_queue.html", context, failed=bool(form.errors))


def _save_queue(actor, queue: JobQueue, data: dict) -> JobQueue:
    policy = pop_fair_share(data)
    services.update_job_queue(actor, queue, **data)
    return usage_fairness.set_policy(actor, queue, **policy)


class QueueDeleteView(AdminDeleteView):
    model, kind, listed, detail = JobQueue, "job queue", "manage-queues", "manage-queue"

    def delete(self, queue) -> None:
        queue_services.delete_job_queue(self.request.user, queue)


queue_delete = QueueDeleteView.as_view()
