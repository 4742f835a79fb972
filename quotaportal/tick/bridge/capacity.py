"""What a job queue may use: its environment's capacity now (max_capacity plus the active
reservations, no more than its backend can use), less what the environment's other queues
hold; and the upper bound a job may ever fit in."""

from __future__ import annotations

from datetime import datetime

from django.db import connection
from django.db.models import Min, Q, Sum
from django.utils import timezone

from quotaportal.quotas.backends import backend_for
from quotaportal.quotas.models import (
    DISPATCHED,
    EnvironmentCapacity,
    Job,
    JobQueue,
    Reservation,
    ServiceEnvironment,
    State,
)


def environment_limits(env: ServiceEnvironment) -> dict[str, int]:
    """The environment's base max_capacity per unit (reservations not included)."""
    rows = EnvironmentCapacity.objects.filter(environment=env).values_list(
        "capacity_unit__name", "max_capacity"
    )
    return dict(rows)


def _plus_reserved(env: ServiceEnvironment, reservations) -> dict[str, int]:
    """Base max_capacity plus the given reservations' instances, per unit, in one query."""
    base = (
        EnvironmentCapacity.objects.filter(environment=env)
        .values_list("capacity_unit__name", "max_capacity")
        .order_by()
    )
    # Unordered: SQLite allows no ORDER BY inside a UNION (reservations sort by start).
    extra = reservations.values_list("capacity_unit__name", "instances").order_by()
    capacity: dict[str, int] = {}
    for unit, count in base.union(extra, all=True):
        capacity[unit] = capacity.get(unit, 0) + count
    return capacity


def allowed_capacity(env: ServiceEnvironment, now: datetime | None = None) -> dict[str, int]:
    """Base max_capacity plus the reservations active at `now`: what the environment's
    settings allow, before its backend says what it can use (capacity_now)."""
    now = now or timezone.now()
    active = Reservation.objects.filter(environment=env, starts_at__lte=now, ends_at__gt=now)
    return _plus_reserved(env, active)


def capacity_now(env: ServiceEnvironment, now: datetime | None = None) -> dict[str, int]:
    """The environment's capacity at `now`, per unit: max_capacity plus the active
    reservations, no more than its backend can use (LOCAL: its READY hosts' slots). The one
    figure every page, /metrics and the planner (capacity_of) show and use."""
    return usable_capacity(env, allowed_capacity(env, now))


def usable_capacity(env: ServiceEnvironment, allowed: dict[str, int]) -> dict[str, int]:
    """What the environment's backend can use of `allowed` (max_capacity and reservations)."""
    return backend_for(env).capacity(env, allowed)


def most_capacity(env: ServiceEnvironment, now: datetime | None = None) -> dict[str, int]:
    """An upper bound from now on (base plus every reservation not over yet): a job larger
    than this can never run; a smaller one may wait for a reservation to start."""
    now = now or timezone.now()
    return _plus_reserved(env, Reservation.objects.filter(environment=env, ends_at__gt=now))


def next_reservation_end(env: ServiceEnvironment, now: datetime) -> datetime | None:
    """When the first reservation that most_capacity(env, now) counts ends."""
    ends = Reservation.objects.filter(environment=env, ends_at__gt=now).aggregate(Min("ends_at"))
    return ends["ends_at__min"]


def _usable(queue: JobQueue, limits: dict[str, int]) -> dict[str, int] | None:
    """The environment's capacity (`limits`) as its backend can use it; None while off."""
    env = queue.service_environment
    if env.state != State.ENABLED or queue.state != State.ENABLED:
        return None
    return usable_capacity(env, limits)


def _held(env: ServiceEnvironment, queues) -> dict[str, int]:
    return dict(
        Job.objects.filter(job_queue__in=queues, status__in=DISPATCHED)
        .values_list("capacity_unit__name")
        .annotate(total=Sum("quantity"))
    )


# capacity_of's two reads in one statement (both databases): it runs on every tick, and one
# round trip without the ORM's query building is a fraction of the two it replaces.
CAPACITY_SQL = """
    SELECT u.name, c.held, CAST(SUM(c.n) AS integer) FROM (
        SELECT false AS held, capacity_unit_id AS unit, max_capacity AS n
        FROM quotas_environmentcapacity WHERE environment_id = %(env)s
        UNION ALL
        SELECT false, capacity_unit_id, instances FROM quotas_reservation
        WHERE environment_id = %(env)s AND starts_at <= %(now)s AND ends_at > %(now)s
        UNION ALL
        SELECT true, j.capacity_unit_id, j.quantity FROM quotas_job j
        JOIN quotas_jobqueue q ON q.id = j.job_queue_id
        WHERE q.service_environment_id = %(env)s AND j.job_queue_id <> %(queue)s
          AND j.status IN ('SCHEDULED', 'STARTING', 'RUNNING')
    ) c JOIN quotas_capacityunit u ON u.id = c.unit GROUP BY u.name, c.held
"""


def _limits_and_held(queue: JobQueue, now: datetime) -> tuple[dict[str, int], dict[str, int]]:
    """The environment's capacity now (max_capacity plus active reservations) and what its
    other queues' dispatched jobs hold, per unit."""
    limits: dict[str, int] = {}
    held: dict[str, int] = {}
    now = connection.ops.adapt_datetimefield_value(now)  # as the database stores it
    with connection.cursor() as cursor:
        cursor.execute(
            CAPACITY_SQL, {"env": queue.service_environment_id, "queue": queue.pk, "now": now}
        )
        for unit, is_held, count in cursor.fetchall():
            (held if is_held else limits)[unit] = count
    return limits, held


def capacity_of(queue: JobQueue, now: datetime | None = None) -> dict[str, int]:
    """C(u) for this queue: the environment's capacity now (max_capacity plus active
    reservations; for LOCAL no more than its READY hosts' slots) less what the environment's
    other queues' dispatched jobs hold.

    Queues share an environment without preempting each other: the tick serves them in
    priority order, so a lower queue sees what the higher ones leave.
    """
    limits, held = _limits_and_held(queue, now or timezone.now())
    usable = _usable(queue, limits)
    if usable is None:
        return dict.fromkeys(limits, 0)
    return {unit: max(0, count - held.get(unit, 0)) for unit, count in usable.items()}


def fit_targets(queue: JobQueue, units: set[str], now: datetime) -> dict[str, int]:
    """For units whose reserved capacity just ended: the usage this queue must come down to.

    Queues ahead of it in the tick (higher priority, then name) keep what they hold; this
    queue fits in the rest, and the queues after it fit in what it leaves.
    """
    if not units:
        return {}
    env = queue.service_environment
    usable = _usable(queue, allowed_capacity(env, now)) or {}
    ahead = env.job_queues.filter(
        Q(priority__gt=queue.priority) | Q(priority=queue.priority, name__lt=queue.name)
    )
    held = _held(env, ahead)
    return {unit: max(0, usable.get(unit, 0) - held.get(unit, 0)) for unit in sorted(units)}
