"""What the dashboard reads for one queue, every two seconds while a page is open: whether
anything changed (dashboard_version), and if so every share's use, limits and jobs, the
recent preemptions and the usage history (queue_dashboard), in a fixed number of queries.

The queue's jobs are read once, grouped by share, unit and status: the same rows give the
instances each share uses and its running and waiting counts."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Count, Sum
from django.utils import timezone

from quotaportal.quotas.models import (
    ACTIVE,
    CapacityUnit,
    Event,
    Job,
    JobQueue,
    JobStatus,
    QuotaShare,
    UtilizationSample,
)
from quotaportal.quotas.selectors import overcommitted_words, upcoming_capacity_changes
from quotaportal.tick import bridge
from scheduler.utilization import share_breakdown

BAR_PARTS = ("own", "borrowed", "lent", "idle", "short")
PREEMPTION_KINDS = ("preempted_cross_share", "preempted_in_share", "preempted_capacity")


@dataclass(frozen=True)
class ShareCard:
    """What the dashboard shows of a share: a share row holds more than a card draws, and
    reading two hundred of them as models is most of a refresh's Python."""

    id: int
    name: str
    state: str
    sharing_strategy: str
    borrow_limit: int
    in_share_preemption: bool
    team_name: str

    @property
    def pk(self) -> int:
        return self.id


# ShareCard's fields, in its order, as the share's columns.
SHARE_CARD_COLUMNS = (
    *("id", "name", "state", "sharing_strategy", "borrow_limit", "in_share_preemption"),
    "team__name",
)


# What a preemption's line shows (a job row holds its whole command and environment).
EVENT_FIELDS = (
    *("id", "time", "kind", "detail"),
    *("job_id", "job__name", "job__share_name", "share_id", "share__name"),
)


def dashboard_version(queue: JobQueue, capacity: dict[str, int], now) -> str:
    """Changes whenever what the dashboard shows of `queue` may have: a new event (dispatch,
    preemption, end, any change), a new utilization sample, a change of the queue or of its
    `capacity` (bridge.capacity_of), and each minute (the chart's time axis moves)."""
    last_event = (
        Event.objects.filter(job_queue=queue).order_by("-id").values_list("id", flat=True).first()
    )
    last_sample = (
        UtilizationSample.objects.filter(job_queue=queue)
        .order_by("-time")
        .values_list("id", flat=True)
        .first()
    )
    state = (
        queue.pk,
        queue.state_version,
        last_event,
        last_sample,
        sorted(capacity.items()),
        int(now.timestamp() // 60),
    )
    return hashlib.sha1(repr(state).encode()).hexdigest()[:16]


def queue_dashboard(queue: JobQueue, capacity: dict[str, int], since) -> dict:
    """Everything the dashboard shows for one queue whose capacity is `capacity`."""
    shares = [
        ShareCard(*row)
        for row in QuotaShare.objects.filter(job_queue=queue)
        .order_by("name")
        .values_list(*SHARE_CARD_COLUMNS)
    ]
    limits = bridge.share_limits(queue)
    used, counts = share_activity(queue, {share.id: share.name for share in shares})
    planned = [bridge.share_of(share, limits.get(share.id, {})) for share in shares]
    utilization = share_breakdown(planned, used, capacity)
    rows = [
        {
            "share": share,
            "units": [
                {"unit": unit, **figures} for unit, figures in utilization[share.name].items()
            ],
            **counts[share.id],
        }
        for share in shares
    ]
    return {
        "queue": queue,
        "overcommitted": _overcommitted(shares, limits, queue),
        "capacity": capacity,
        "shares": rows,
        "preemptions": recent_preemptions(queue),
        "last_run": queue.scheduler_runs.filter(skipped=False).order_by("-started_at").first(),
        "history": list(
            UtilizationSample.objects.filter(job_queue=queue, time__gte=since).order_by("time")
        ),
        "upcoming": upcoming_capacity_changes(queue.service_environment, timezone.now(), 3),
    }


def share_activity(queue: JobQueue, share_names: dict[int, str]) -> tuple[dict, dict]:
    """From one grouped read of the queue's active jobs: per share name and unit, the
    instances its dispatched jobs hold; per share id, {"runnable": n, "running": m}."""
    unit_names = dict(CapacityUnit.objects.values_list("id", "name"))
    used: dict[str, dict[str, int]] = defaultdict(dict)
    counts: dict[int, dict[str, int]] = defaultdict(lambda: {"runnable": 0, "running": 0})
    rows = (
        Job.objects.filter(job_queue=queue, status__in=ACTIVE)
        .values_list("quota_share_id", "capacity_unit_id", "status")
        .annotate(jobs=Count("id"), instances=Sum("quantity"))
        .order_by()
    )
    for share_id, unit_id, status, jobs, instances in rows:
        if status == JobStatus.RUNNABLE:
            counts[share_id]["runnable"] += jobs
            continue
        counts[share_id]["running"] += jobs  # ACTIVE but not RUNNABLE: dispatched
        if share_id in share_names:
            units = used[share_names[share_id]]
            unit = unit_names[unit_id]
            units[unit] = units.get(unit, 0) + instances
    return used, counts


def recent_preemptions(queue: JobQueue, limit: int = 8) -> list[Event]:
    return list(
        Event.objects.filter(job_queue=queue, kind__in=PREEMPTION_KINDS)
        .select_related("job", "share")
        .only(*EVENT_FIELDS)
        .order_by("-time", "-id")[:limit]
    )


def _overcommitted(shares, limits: dict[int, dict[str, int]], queue: JobQueue) -> list[str]:
    """selectors.overcommitted_units from the limits already read."""
    totals: dict[str, int] = {}
    for share in shares:
        if share.state == "ENABLED":
            for unit, count in limits.get(share.id, {}).items():
                totals[unit] = totals.get(unit, 0) + count
    return overcommitted_words(totals, bridge.capacity_now(queue.service_environment))


def with_bars(rows: list[dict]) -> list[dict]:
    """The rows drawn as cards, each unit's figures with its bar's segments (only these: a
    queue may have hundreds of shares and the dashboard draws a few)."""
    for row in rows:
        row["units"] = [_bar(figures) for figures in row["units"]]
    return rows


def _bar(figures: dict) -> dict:
    """One share's use of one unit as bar segments: own use, borrowed, lent out, idle."""
    own = min(figures["used"], figures["limit"])
    sizes = {
        "own": own,
        "borrowed": figures["borrowed"],
        "lent": figures["lent"],
        "idle": figures["idle"],
        "short": figures.get("short", 0),
    }
    total = max(sum(sizes.values()), 1)
    segments = [(part, sizes[part], round(100 * sizes[part] / total, 2)) for part in BAR_PARTS]
    return {**figures, "own": own, "segments": segments}
