"""Jobs that wait before they may be planned: on other jobs' outcomes (dependencies) and on
their array's limit of children at once. Such a job is PENDING (AWS Batch's state for a job
waiting on its dependencies), outside every plan: the planner never sees it. Each tick
releases, before planning, the pending jobs whose turn has come (RUNNABLE from then on), and
fails those whose dependencies can no longer be met.

A dependency is (job, kind): `afterok` waits for that job to succeed, `afternotok` for it to
fail, `afterany` for it to end either way. A dependency on a job that ended the other way
can never be met: the dependant fails, saying which. An array child is released only while
fewer than its array's `max_running` children are RUNNABLE or dispatched, lowest index first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

SUCCEEDED, FAILED = "SUCCEEDED", "FAILED"


class After(StrEnum):
    OK = "afterok"
    ANY = "afterany"
    NOT_OK = "afternotok"


WORDS = {After.OK: "succeed", After.ANY: "end", After.NOT_OK: "fail"}
ARRAY_FULL = "Waits for a place among its array's children running at once"


def outcome(kind: After, status: str | None) -> bool | None:
    """True: met; False: can never be met; None: not yet (or the job is unknown)."""
    if status not in (SUCCEEDED, FAILED):
        return None
    if kind == After.ANY:
        return True
    return (status == SUCCEEDED) == (kind == After.OK)


@dataclass(frozen=True)
class Waiting:
    """A pending job: its dependencies (job id, kind), its array and index if a child."""

    id: str
    after: tuple[tuple[str, After], ...] = ()
    array: str | None = None
    index: int = 0


@dataclass
class Release:
    released: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # job id -> why, in words
    waiting: dict[str, str] = field(default_factory=dict)  # job id -> what it waits for


def release(
    pending: Iterable[Waiting],
    statuses: Mapping[str, str],
    names: Mapping[str, str],
    room: Mapping[str, int],
) -> Release:
    """Which pending jobs go on: `statuses` are the dependencies' statuses now, `names` their
    names (for the reasons), `room` per array how many more children may be released."""
    result = Release()
    room = dict(room)
    for job in sorted(pending, key=lambda j: (j.array or "", j.index, j.id)):
        unmet = _unmet(job, statuses, names)
        if unmet is not None:
            never, words = unmet
            (result.failed if never else result.waiting)[job.id] = words
            continue
        if job.array is not None:
            if room.get(job.array, 0) <= 0:
                result.waiting[job.id] = ARRAY_FULL
                continue
            room[job.array] -= 1
        result.released.append(job.id)
    return result


def _unmet(
    job: Waiting, statuses: Mapping[str, str], names: Mapping[str, str]
) -> tuple[bool, str] | None:
    """None when every dependency is met; else (can never be met, why in words)."""
    waits = []
    for dependency, kind in job.after:
        name = names.get(dependency, dependency)
        met = outcome(kind, statuses.get(dependency))
        if met is False:
            ended = "failed" if statuses.get(dependency) == FAILED else "succeeded"
            return True, f"Dependency not met: job {name} {ended} (it was to {WORDS[kind]})"
        if met is None:
            waits.append(f"job {name} to {WORDS[kind]}")
    if waits:
        return False, "Waits for " + " and ".join(waits)
    return None
