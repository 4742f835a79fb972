"""A SLURM environment's settings in the admin console: how the portal reaches the cluster,
each capacity unit's partition and GPU type, and what the last look at the cluster found."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect

from quotaportal.quotas import selectors
from quotaportal.quotas.models import Backend, ServiceEnvironment
from quotaportal.slurm.models import SlurmCluster, SlurmState
from quotaportal.slurm.services import config
from quotaportal.web.forms.slurm import SlurmClusterForm, SlurmUnitForm
from quotaportal.web.views.manage.common import page, require_admin, saved


@login_required
def slurm_settings(request, pk):
    require_admin(request)
    env = get_object_or_404(ServiceEnvironment, pk=pk, backend=Backend.SLURM)
    cluster = SlurmCluster.objects.filter(environment=env).first() or SlurmCluster(environment=env)
    which = request.POST.get("form")
    cluster_form = SlurmClusterForm(
        request.POST if which == "cluster" else None,
        initial={
            **{name: getattr(cluster, name) for name in config.CLUSTER_FIELDS},
            "user_map": ", ".join(f"{k}={v}" for k, v in cluster.user_map.items()),
        },
        prefix="cluster",
    )
    mapped = (
        {u.capacity_unit.name: u for u in cluster.units.select_related("capacity_unit")}
        if cluster.pk
        else {}
    )
    unit_forms = [
        (
            unit,
            SlurmUnitForm(
                request.POST if which == f"unit-{unit}" else None,
                initial=_unit_initial(mapped.get(unit)),
                prefix=f"unit-{unit}",
            ),
        )
        for unit in env.capacity_limits.order_by("capacity_unit__name").values_list(
            "capacity_unit__name", flat=True
        )
    ]
    if request.method == "POST":
        if which == "cluster":
            done = saved(cluster_form, lambda d: config.configure_cluster(request.user, env, **d))
        else:
            unit, form = next(((u, f) for u, f in unit_forms if which == f"unit-{u}"), (None, None))
            done = form is not None and saved(
                form, lambda d, unit=unit: config.set_unit(request.user, env, unit, **d)
            )
        if done:
            messages.success(request, "Saved the Slurm settings; the next tick uses them.")
            return redirect("manage-slurm", env.pk)
    context = {
        "env": env,
        "cluster_form": cluster_form,
        "unit_forms": unit_forms,
        "state": SlurmState.objects.filter(environment=env).first(),
        "connection": selectors.connection_health(env),
    }
    return page(request, "web/manage_slurm.html", context, failed=request.method == "POST")


def _unit_initial(mapped) -> dict:
    if mapped is None:
        return {}
    return {
        "partition": mapped.partition,
        "gpu_type": mapped.gpu_type,
        "constraint": mapped.constraint,
    }
