"""A usage report for any period: the complete hours from the hourly rows, the rest (the
period's ragged ends, the hours not rolled up yet, the attempts still open) summed live from
the attempts, so a report agrees with the job pages to the second."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db.models import Min, Q, Sum
from django.utils import timezone

from quotaportal.quotas.models import JobQueue
from quotaportal.quotas.permissions import is_platform_admin
from quotaportal.usage import rollup
from quotaportal.usage.models import DAY, FIGURES, HOUR, WEEK, UsageHour, UsageWait
from scheduler.accounting import Figures

GROUPS = {
    "team": ("team",),
    "share": ("job_queue", "quota_share"),
    "user": ("user",),
    "unit": ("unit",),
    "queue": ("job_queue",),
}
# Not offered to people: the labels of the Prometheus counters.
SHARE_AND_TEAM_GROUP, SHARE_AND_TEAM = "share_and_team", ("job_queue", "quota_share", "team")
PREEMPTED = tuple(f for f in FIGURES if f.startswith("preempted_"))


@dataclass(frozen=True)
class Scope:
    """Which rows a report may see and was asked for (None: no restriction)."""

    teams: frozenset[str] | None = None
    job_queue: str | None = None
    team: str | None = None

    def rows_q(self) -> Q:
        q = Q()
        if self.teams is not None:
            q &= Q(team__in=sorted(self.teams))
        if self.job_queue:
            q &= Q(job_queue=self.job_queue)
        if self.team:
            q &= Q(team=self.team)
        return q

    def admits(self, key: tuple) -> bool:
        queue, _share, team, _user, _unit = key
        return (
            (self.teams is None or team in self.teams)
            and (not self.job_queue or queue == self.job_queue)
            and (not self.team or team == self.team)
        )


@dataclass
class Group:
    figures: dict[str, float] = field(default_factory=lambda: dict.fromkeys(FIGURES, 0.0))
    waits: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, values: dict) -> None:
        for name in FIGURES:
            self.figures[name] += values.get(name) or 0

    def as_row(self) -> dict:
        row = {name: _rounded(self.figures[name]) for name in FIGURES}
        row["preempted_instance_seconds"] = _rounded(sum(self.figures[f] for f in PREEMPTED))
        row["attempts"], row["jobs"] = int(self.figures["attempts"]), int(self.figures["jobs"])
        row["wait_p50_s"] = wait_percentile(self.waits, 0.5)
        row["wait_p90_s"] = wait_percentile(self.waits, 0.9)
        return row


@dataclass(frozen=True)
class Sources:
    """Where a period's figures come from: the rows for [rolled_from, rolled_to), and the
    ledger entries summed live for the rest (hour, ledger key, Figures), within the scope.
    Read once, so a page's table and chart agree and the attempts are swept once."""

    rolled_from: datetime
    rolled_to: datetime
    live: list[tuple[float, tuple, Figures]]


def sources(start: datetime, end: datetime, scope: Scope, now: datetime | None = None) -> Sources:
    """`end` may lie ahead (a period that ends tomorrow): nothing is counted past `now`, the
    hours to come hold no use, no entitlement and no wait yet."""
    end = max(start, min(end, now or timezone.now()))
    rolled_from, rolled_to = _rolled_range(start, end)
    ranges = _live_ranges(start, end, rolled_from, rolled_to)
    live = []
    if ranges:
        reach = rollup.attempt_reach()
        queues = JobQueue.objects.select_related("service_environment")
        if scope.job_queue:
            queues = queues.filter(name=scope.job_queue)
        for queue in queues:
            for live_from, live_to in ranges:
                ledger = rollup.ledger_of(queue, live_from, live_to, reach)
                live += [
                    (hour, key, figures)
                    for (hour, key), figures in ledger.items()
                    if scope.admits(key)
                ]
    return Sources(rolled_from, rolled_to, live)


def usage_report(
    start: datetime, end: datetime, group_by: str, scope: Scope, read: Sources | None = None
) -> dict:
    """{"start", "end", "group_by", "rows": [{"key", figures…}], "totals": {figures…}}."""
    read = read or sources(start, end, scope)
    groups: dict[tuple, Group] = defaultdict(Group)
    totals = Group()
    fields = {**GROUPS, SHARE_AND_TEAM_GROUP: SHARE_AND_TEAM}[group_by]
    for piece_from, piece_to, span in _pieces(read.rolled_from, read.rolled_to):
        _add_rolled(groups, totals, fields, piece_from, piece_to, span, scope)
    _add_live(groups, totals, fields, read.live)
    rows = [
        {"key": _key_text(key), **_key_fields(fields, key), **group.as_row()}
        for key, group in groups.items()
    ]
    rows.sort(key=lambda r: (-r["instance_seconds"], r["key"]))
    return {
        "start": start,
        "end": end,
        "group_by": group_by,
        "rows": rows,
        "totals": totals.as_row(),
    }


def _rolled_range(start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The complete hours inside [start, end) that the hourly rows hold."""
    first = rollup.floor_hour(start)
    if first < start:
        first += timedelta(hours=1)
    last = rollup.floor_hour(end)
    done = rollup.rolled_until()
    if done is None:
        return first, first
    last = min(last, done)
    return first, max(first, last)


def _live_ranges(start, end, rolled_from, rolled_to) -> list[tuple[datetime, datetime]]:
    if rolled_from >= rolled_to:
        return [(start, end)] if start < end else []
    return [(a, b) for a, b in ((start, rolled_from), (rolled_to, end)) if a < b]


def _pieces(
    start: datetime, end: datetime, longest: int = WEEK
) -> list[tuple[datetime, datetime, int]]:
    """[start, end) of whole hours as (from, to, span) pieces, the longest rows first: whole
    ISO weeks from the week rows, whole UTC days from the day rows, hours from the hour rows
    (no piece longer than `longest`)."""
    if start >= end:
        return []
    for span, floor, length in (
        (WEEK, rollup.floor_week, timedelta(weeks=1)),
        (DAY, rollup.floor_day, timedelta(days=1)),
    ):
        if span > longest:
            continue
        first = floor(start)
        if first < start:
            first += length
        last = floor(end)
        if first < last:
            return [
                *_pieces(start, first, longest),
                (first, last, span),
                *_pieces(last, end, longest),
            ]
    return [(start, end, HOUR)]


def _add_rolled(groups, totals: Group, fields, start, end, span: int, scope: Scope) -> None:
    rows = UsageHour.objects.filter(scope.rows_q(), span=span, hour__gte=start, hour__lt=end)
    for values in rows.values(*fields).annotate(**rollup.figure_sums()).order_by():
        key = tuple(values[f] for f in fields)
        if not _shares_row_among_users(fields, key):
            groups[key].add(rollup.unaliased(values))
    totals.add(rollup.unaliased(rows.aggregate(**rollup.figure_sums())))
    waits = UsageWait.objects.filter(scope.rows_q(), span=span, hour__gte=start, hour__lt=end)
    for values in waits.values(*fields, "bucket").annotate(n=Sum("jobs")).order_by():
        key = tuple(values[f] for f in fields)
        groups[key].waits[values["bucket"]] += values["n"]
        totals.waits[values["bucket"]] += values["n"]


def _picked(key: tuple, fields: tuple) -> tuple:
    """The parts of a ledger key (rollup.KEYS) a report groups by."""
    named = dict(zip(rollup.KEYS, key, strict=True))
    return tuple(named[f] for f in fields)


def _shares_row_among_users(fields, key) -> bool:
    """Lent and idle belong to a share, not to a person: no row of their own by user."""
    return fields == ("user",) and key == ("",)


def _add_live(groups, totals: Group, fields, live: list) -> None:
    for _, key, figures in live:
        values = rollup.row_values(figures)
        buckets = [rollup.wait_bucket(w) for w in figures.waits]
        picked = _picked(key, fields)
        counted = [totals]
        if not _shares_row_among_users(fields, picked):
            counted.append(groups[picked])
        for group in counted:
            group.add(values)
            for bucket in buckets:
                group.waits[bucket] += 1


def wait_percentile(histogram: dict[int, int], fraction: float) -> float | None:
    """The wait at `fraction` of the jobs, from the logarithmic buckets (within about 7 %)."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = fraction * total
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return _bucket_middle(bucket)
    return _bucket_middle(max(histogram))


def _bucket_middle(bucket: int) -> float:
    if bucket == 0:
        return 0.0
    low = rollup.WAIT_BUCKET_RATIO ** (bucket - 1)
    return round(math.sqrt(low * low * rollup.WAIT_BUCKET_RATIO), 1)


def _key_text(key: tuple) -> str:
    return str(key[0]) if len(key) == 1 else "/".join(str(part) for part in key[:2])


def _key_fields(fields, key) -> dict:
    return dict(zip(fields, key, strict=True)) if len(fields) > 1 else {}


def _rounded(value: float) -> float:
    return round(value, 3)


def parse_period(start: str | None, end: str | None, now: datetime) -> tuple[datetime, datetime]:
    """ISO 8601 bounds (either may be left out: the last 7 days up to now)."""
    end_at = parse_time(end, "end") if end else now
    start_at = parse_time(start, "start") if start else end_at - timedelta(days=7)
    if start_at >= end_at:
        raise ValueError({"start": "start must be before end"})
    if end_at - start_at > timedelta(days=400):
        raise ValueError({"start": "a report covers at most 400 days; narrow the period"})
    return start_at, end_at


def parse_time(text: str, name: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise ValueError(
            {name: f"{shown!r} is not an ISO 8601 time; for example 2026-12-01T00:00:00Z"}
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def since_ever(now: datetime) -> dict:
    """Everything on record up to `now`, per queue, share and team (Prometheus's counters)."""
    first = UsageHour.objects.aggregate(first=Min("hour"))["first"]
    first = first or rollup.floor_hour(now)
    return usage_report(first, now, SHARE_AND_TEAM_GROUP, Scope())


def scope_for(user, job_queue: str | None = None, team: str | None = None) -> Scope:
    """Admins see every team's rows; anyone else their own teams'."""
    teams = None
    if not is_platform_admin(user):
        teams = frozenset(user.teams.values_list("name", flat=True))
    return Scope(teams=teams, job_queue=job_queue or None, team=team or None)


CSV_COLUMNS = (
    "key",
    "instance_seconds",
    "gpu_seconds",
    "own_instance_seconds",
    "borrowed_instance_seconds",
    "preempted_instance_seconds",
    *PREEMPTED,
    "lent_instance_seconds",
    "idle_while_waiting_instance_seconds",
    "waited_beside_idle_instance_seconds",
    "entitled_instance_seconds",
    "runnable_seconds",
    "jobs",
    "attempts",
    "wait_p50_s",
    "wait_p90_s",
)


def csv_lines(report: dict) -> list[list]:
    """The report as CSV rows: a header, one per group, then the totals (key "total")."""
    lines = [list(CSV_COLUMNS)]
    for row in [*report["rows"], {**report["totals"], "key": "total"}]:
        lines.append(["" if row.get(c) is None else row.get(c) for c in CSV_COLUMNS])
        lines[-1][0] = _inert(lines[-1][0])
    return lines


def _inert(text: str) -> str:
    """A name a spreadsheet would run as a formula (a user called "=HYPERLINK(…)") is
    quoted so it opens as text."""
    return f"'{text}" if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def usage_series(
    start: datetime,
    end: datetime,
    group_by: str,
    scope: Scope,
    step: timedelta,
    read: Sources | None = None,
):
    """Own and borrowed instance-seconds per `step` (a whole number of hours) and group:
    (bucket starts, {group key text: {"own": [...], "borrowed": [...]}})."""
    read = read or sources(start, end, scope)
    step_s = step.total_seconds()
    first = rollup.floor_hour(start)
    buckets = []
    moment = first
    while moment < end:
        buckets.append(moment)
        moment += step
    series: dict[str, dict[str, list[float]]] = {}

    def add(hour: datetime, key: tuple, own: float, borrowed: float) -> None:
        index = int((hour - first).total_seconds() // step_s)
        if not 0 <= index < len(buckets):
            return
        lines = series.setdefault(
            _key_text(key), {"own": [0.0] * len(buckets), "borrowed": [0.0] * len(buckets)}
        )
        lines["own"][index] += own or 0
        lines["borrowed"][index] += borrowed or 0

    fields = GROUPS[group_by]
    # Day rows where a bucket is a day or more (a quarter draws from ninety rows a group).
    longest = DAY if step >= timedelta(days=1) else HOUR
    for piece_from, piece_to, span in _pieces(read.rolled_from, read.rolled_to, longest):
        rows = UsageHour.objects.filter(
            scope.rows_q(),
            span=span,
            hour__gte=piece_from,
            hour__lt=piece_to,
            instance_seconds__gt=0,
        )
        for values in (
            rows.values("hour", *fields)
            .annotate(own=Sum("own_instance_seconds"), borrowed=Sum("borrowed_instance_seconds"))
            .order_by()
        ):
            key = tuple(values[f] for f in fields)
            add(values["hour"], key, values["own"], values["borrowed"])
    for hour, key, figures in read.live:
        if figures.instance_seconds:
            add(
                datetime.fromtimestamp(hour, UTC),
                _picked(key, fields),
                figures.own_instance_seconds,
                figures.borrowed_instance_seconds,
            )
    return buckets, dict(sorted(series.items()))
