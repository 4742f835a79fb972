"""Tags on jobs and on the admin resources (AWS TagResource / UntagResource)."""

from __future__ import annotations

from django.db import transaction

from quotaportal.jobs.fields import MAX_TAGS, tags_error
from quotaportal.quotas.audit import record
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import EventKind, Job
from quotaportal.quotas.permissions import require_admin, require_job_access


def _require_tagger(actor, obj) -> None:
    if isinstance(obj, Job):
        require_job_access(actor, obj)
    else:
        require_admin(actor, f"tag {obj._meta.verbose_name}s")


def _audit(actor, obj, **detail) -> None:
    if isinstance(obj, Job):
        record(actor, EventKind.RESOURCE_CHANGED, job=obj, resource="job", name=obj.name, **detail)
    else:
        resource = str(obj._meta.verbose_name)
        record(actor, EventKind.RESOURCE_CHANGED, resource=resource, name=str(obj), **detail)


@transaction.atomic
def tag_resource(actor, obj, tags) -> dict:
    """Add or overwrite tags; the result must still follow AWS's tag rules."""
    _require_tagger(actor, obj)
    if not isinstance(tags, dict) or not tags:
        raise InvalidInput({"tags": "give at least one tag as key: value"})
    obj = type(obj).objects.select_for_update().get(pk=obj.pk)
    merged = {**obj.tags, **tags}
    if error := tags_error(merged):
        raise InvalidInput({"tags": error})
    obj.tags = merged
    obj.save(update_fields=["tags"])
    _audit(actor, obj, action="tagged", tags=tags)
    return merged


@transaction.atomic
def untag_resource(actor, obj, keys) -> dict:
    """Remove the tags with these keys; keys that are not there are ignored, as AWS does."""
    _require_tagger(actor, obj)
    if not isinstance(keys, list) or not keys or len(keys) > MAX_TAGS:
        raise InvalidInput({"tag_keys": f"give 1 to {MAX_TAGS} tag keys"})
    if not all(isinstance(key, str) and key for key in keys):
        raise InvalidInput({"tag_keys": "tag keys are non-empty text"})
    obj = type(obj).objects.select_for_update().get(pk=obj.pk)
    obj.tags = {k: v for k, v in obj.tags.items() if k not in set(keys)}
    obj.save(update_fields=["tags"])
    _audit(actor, obj, action="untagged", tag_keys=keys)
    return obj.tags
