"""Where a submission goes: its queue, share and unit found (from the cached lookups, or a
batch's own), checked (exists, allowed, can ever fit the environment)."""

from __future__ import annotations

from quotaportal.quotas.config_cache import CachedLookups
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import CapacityUnit, JobQueue, QuotaShare, State
from quotaportal.quotas.permissions import is_platform_admin, require_share_member, team_ids
from quotaportal.tick import bridge
from scheduler.validation import submission_error


def target(
    actor, job_queue: JobQueue, fields: dict, now, cache: dict | None = None
) -> tuple[QuotaShare, CapacityUnit]:
    """The share and unit a submission names, checked: exists, allowed, and can ever fit.

    `cache` keeps the lookups between the items of one batch (same queue, share, unit)."""
    cache = {} if cache is None else cache
    if job_queue.state != State.ENABLED:
        raise InvalidInput(
            {"job_queue": f"job queue {job_queue.name} is DISABLED and accepts no jobs"}
        )
    name = fields["quota_share"]
    share = cached(
        cache,
        ("share", job_queue.pk, name),
        lambda: job_queue.quota_shares.select_related("team").filter(name=name).first(),
    )
    if share is None:
        raise InvalidInput(
            {"quota_share": f"quota share {name} does not exist in job queue {job_queue.name}"}
        )
    if not is_platform_admin(actor):
        # Seeds the user's team ids (permissions.team_ids) from the cached lookups.
        actor._qp_team_ids = cached(cache, ("teams", actor.pk), lambda: team_ids(actor))
    require_share_member(actor, share)
    unit_name = fields["capacity_unit"]
    unit = cached(
        cache, ("unit", unit_name), lambda: CapacityUnit.objects.filter(name=unit_name).first()
    )
    if unit is None:
        raise InvalidInput({"capacity_unit": f"capacity unit {unit_name} does not exist"})
    capacity = cached(
        cache,
        ("capacity", job_queue.service_environment_id),
        lambda: _most_capacity(job_queue.service_environment, now, cache),
    )
    config = cached(cache, ("config", share.pk), lambda: bridge.share_of(share))
    if error := submission_error(config, unit.name, fields["quantity"], capacity):
        raise InvalidInput({"quantity" if "needs" in error else "quota_share": error})
    return share, unit


def cached(cache: dict, key, load):
    if key not in cache:
        cache[key] = load()
    return cache[key]


def _most_capacity(env, now, cache: dict) -> dict[str, int]:
    if isinstance(cache, CachedLookups) and (ends := bridge.next_reservation_end(env, now)):
        cache.expire_by(ends)  # the capacity it adds is counted until then
    return bridge.most_capacity(env, now)


def queue_named(cache: dict, queue: JobQueue | str) -> JobQueue:
    if isinstance(queue, JobQueue):
        return queue
    found = cached(
        cache,
        ("queue", queue),
        lambda: JobQueue.objects.select_related("service_environment").filter(name=queue).first(),
    )
    if found is None:
        raise InvalidInput({"job_queue": f"job queue {queue} does not exist"})
    return found
