"""Admins tell a SLURM environment how to reach its cluster and what each capacity unit is
there. Every value is checked (it ends up on a command line), every change audited."""

from __future__ import annotations

import re

from django.db import transaction

from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import Backend, CapacityUnit, EventKind, ServiceEnvironment
from quotaportal.quotas.permissions import require_admin
from quotaportal.slurm.models import SlurmCluster, SlurmUnit
from quotaportal.tick.changes import queue_changed

NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
HOST = re.compile(r"[A-Za-z0-9_.-]{1,255}")
ACCOUNT = re.compile(r"[A-Za-z0-9_.-]{1,64}")
RUN_AS = re.compile(r"[A-Za-z0-9_.{}-]{0,150}")
CONSTRAINT = re.compile(r"[A-Za-z0-9_.&|*()\[\]-]{0,255}")
SIGNALS = ("TERM", "USR1", "USR2", "INT", "HUP")
CLUSTER_FIELDS = {
    "ssh_host": "",
    "ssh_user": "",
    "ssh_key": "",
    "slurm_conf": "",
    "run_as": "",
    "user_map": {},
    "work_dir": "/tmp",
    "pending_timeout_seconds": 120,
    "checkpoint_signal": "TERM",
}


def _path_error(value: str, required: bool = False) -> str | None:
    if not isinstance(value, str) or (required and not value):
        return "give an absolute path"
    if value and (
        not value.startswith("/") or len(value) > 1024 or re.search(r"[\x00-\x1f]", value)
    ):
        return "give an absolute path (starting with /, no control characters)"
    return None


def cluster_errors(fields: dict) -> dict[str, str]:
    """What is wrong with a cluster's settings, field by field."""
    errors = {}
    checks = {
        "ssh_host": (HOST, True, "a host name or address: letters, digits, . - _"),
        "ssh_user": (ACCOUNT, True, "an account name: letters, digits, . - _"),
        "run_as": (RUN_AS, False, "an account name, or a template such as {username}"),
    }
    for name, (pattern, optional, what) in checks.items():
        value = fields[name]
        if not isinstance(value, str) or not (
            (optional and value == "") or pattern.fullmatch(value)
        ):
            errors[name] = f"give {what}"
    for name in ("ssh_key", "slurm_conf"):
        if error := _path_error(fields[name]):
            errors[name] = error
    if error := _path_error(fields["work_dir"], required=True):
        errors["work_dir"] = error
    user_map = fields["user_map"]
    if not isinstance(user_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and ACCOUNT.fullmatch(v)
        for k, v in user_map.items()
    ):
        errors["user_map"] = "map portal usernames to cluster accounts (letters, digits, . - _)"
    timeout = fields["pending_timeout_seconds"]
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 10 <= timeout <= 86400:
        errors["pending_timeout_seconds"] = "give a whole number of seconds from 10 to 86400"
    if fields["checkpoint_signal"] not in SIGNALS:
        errors["checkpoint_signal"] = f"give one of {', '.join(SIGNALS)}"
    return errors


@transaction.atomic
def configure_cluster(actor, env: ServiceEnvironment, **fields) -> SlurmCluster:
    """Set how a SLURM environment reaches its cluster (fields of CLUSTER_FIELDS; those left
    out keep their value)."""
    require_admin(actor, "configure Slurm clusters")
    if env.backend != Backend.SLURM:
        raise InvalidInput({"backend": f"environment {env.name} is {env.backend}, not SLURM"})
    if unknown := sorted(set(fields) - set(CLUSTER_FIELDS)):
        raise InvalidInput(dict.fromkeys(unknown, "unknown field"))
    cluster = SlurmCluster.objects.filter(environment=env).first() or SlurmCluster(environment=env)
    merged = {
        name: fields.get(name, getattr(cluster, name, default))
        for name, default in CLUSTER_FIELDS.items()
    }
    if errors := cluster_errors(merged):
        raise InvalidInput(errors)
    for name, value in merged.items():
        setattr(cluster, name, value)
    cluster.save()
    _changed(actor, env, "configured Slurm of", **fields)
    return cluster


@transaction.atomic
def set_unit(
    actor,
    env: ServiceEnvironment,
    capacity_unit: str,
    *,
    partition: str,
    gpu_type: str = "",
    constraint: str = "",
) -> SlurmUnit:
    """What one capacity unit is in the cluster: GPUs of a type in a partition."""
    require_admin(actor, "configure Slurm clusters")
    cluster = SlurmCluster.objects.filter(environment=env).first()
    if cluster is None:
        raise InvalidInput({"partition": "configure how to reach the cluster first"})
    unit = CapacityUnit.objects.filter(name=capacity_unit).first()
    errors = {}
    if unit is None:
        errors["capacity_unit"] = f"capacity unit {capacity_unit} does not exist"
    if not isinstance(partition, str) or not NAME.fullmatch(partition):
        errors["partition"] = "give a partition name: letters, digits, . - _"
    if not isinstance(gpu_type, str) or (gpu_type and not NAME.fullmatch(gpu_type)):
        errors["gpu_type"] = "give a GPU type as slurm.conf names it (a100), or leave it empty"
    if not isinstance(constraint, str) or not CONSTRAINT.fullmatch(constraint):
        errors["constraint"] = "give features joined by & or |, or leave it empty"
    if errors:
        raise InvalidInput(errors)
    mapped, _ = SlurmUnit.objects.update_or_create(
        cluster=cluster,
        capacity_unit=unit,
        defaults={"partition": partition, "gpu_type": gpu_type, "constraint": constraint},
    )
    _changed(
        actor,
        env,
        "mapped a unit of",
        unit=capacity_unit,
        partition=partition,
        gpu_type=gpu_type,
        constraint=constraint,
    )
    return mapped


def _changed(actor, env: ServiceEnvironment, action: str, **detail) -> None:
    record(
        actor,
        EventKind.RESOURCE_CHANGED,
        action=action,
        resource="service environment",
        name=env.name,
        **detail,
    )
    for queue_id in env.job_queues.values_list("id", flat=True):
        queue_changed(queue_id)
