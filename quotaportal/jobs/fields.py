"""The rules a job's fields follow, checked before anything is stored: the REST API, the
pages and the AWS endpoint all submit through jobs.user_actions, which calls these."""

from __future__ import annotations

import uuid

from quotaportal.jobs.retries import check_evaluate_on_exit
from quotaportal.quotas.errors import InvalidInput
from quotaportal.quotas.models import Job
from quotaportal.quotas.names import aws_name_error
from quotaportal.quotas.permissions import can_change_job
from scheduler.dependencies import After
from scheduler.validation import JOB_NUMBERS, OPTIONAL_JOB_NUMBERS, bound_error


def field_errors(fields: dict) -> dict[str, str]:
    """What is wrong with a submission's fields (field -> message); {} when nothing is."""
    errors = {}
    for field in JOB_NUMBERS:
        value = fields[field]
        if value is None and field in OPTIONAL_JOB_NUMBERS:
            continue
        if error := bound_error(field, value):
            errors[field] = error
    if error := aws_name_error(fields["name"]):
        errors["name"] = error
    if fields["client_token"] is not None and (
        not isinstance(fields["client_token"], str) or not 1 <= len(fields["client_token"]) <= 64
    ):
        errors["client_token"] = "client_token must be 1 to 64 characters"
    if error := check_evaluate_on_exit(fields["evaluate_on_exit"]):
        errors["evaluate_on_exit"] = error
    if error := command_error(fields["command"]):
        errors["command"] = error
    if error := tags_error(fields["tags"]):
        errors["tags"] = error
    if error := depends_on_error(fields["depends_on"]):
        errors["depends_on"] = error
    return errors


MAX_DEPENDENCIES = 20
AFTER_KINDS = tuple(kind.value for kind in After)


def depends_on_error(depends_on) -> str | None:
    """[{"job_id": an id, "type": afterok | afterany | afternotok}], at most 20."""
    shape = (
        f"depends_on must be a list of at most {MAX_DEPENDENCIES} "
        f'{{"job_id", "type"}} with type one of {", ".join(AFTER_KINDS)}'
    )
    if not isinstance(depends_on, list) or len(depends_on) > MAX_DEPENDENCIES:
        return shape
    for entry in depends_on:
        if not isinstance(entry, dict) or set(entry) - {"job_id", "type"}:
            return shape
        if entry.get("type", "afterok") not in AFTER_KINDS or not _is_uuid(entry.get("job_id")):
            return shape
    return None


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return isinstance(value, str)


def dependencies_of(actor, depends_on: list[dict]) -> list[dict]:
    """The dependencies as stored ({job_id, type}), each on a job the actor may see whole
    (its outcome is the team's to know). A job can only depend on jobs submitted before it,
    so no cycle can form."""
    wanted = [{"job_id": str(d["job_id"]), "type": d.get("type", "afterok")} for d in depends_on]
    if not wanted:
        return []
    ids = {d["job_id"] for d in wanted}
    found = Job.objects.filter(pk__in=ids).select_related("quota_share")
    known = {str(job.pk) for job in found if can_change_job(actor, job)}
    if missing := sorted(ids - known):
        raise InvalidInput({"depends_on": f"no job {missing[0]} of your teams to depend on"})
    return wanted


def command_error(command) -> str | None:
    if not isinstance(command, str):
        return "command must be text"
    size = len(command.encode("utf-8", errors="surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        return (
            f"command is {size:,} bytes; the limit is {MAX_COMMAND_BYTES:,} "
            "(put a long script in a file on the host and run that)"
        )
    return None


def tags_error(tags) -> str | None:
    """AWS's tag rules: at most 50, keys 1 to 128 characters, values up to 256."""
    if not isinstance(tags, dict):
        return "tags must be an object of key to value"
    if len(tags) > MAX_TAGS:
        return f"at most {MAX_TAGS} tags, got {len(tags)}"
    for key, value in tags.items():
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_TAG_KEY:
            return f"tag keys must be 1 to {MAX_TAG_KEY} characters"
        if key.lower().startswith("aws:"):
            return f"tag key {key[:40]!r}: keys starting with aws: are AWS's own"
        if not isinstance(value, str) or len(value) > MAX_TAG_VALUE:
            return f"tag {key}: values must be text of at most {MAX_TAG_VALUE} characters"
    return None


MAX_COMMAND_BYTES = 64 * 1024  # every heartbeat carries the commands of a host's jobs
MAX_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE = 50, 128, 256
