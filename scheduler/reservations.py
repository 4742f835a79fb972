"""Reserved capacity with a time window (a training plan): capacity per unit over time.

An environment's capacity per unit is its base plus the reservations active now. A reservation
is active from its start (inclusive) to its end (exclusive). When one ends, the capacity it
added goes away under whatever runs on it, so the first tick at or after its end plans with
`Snapshot.fit_to` for that unit and preempts until the queue fits (see scheduler.planner).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reservation:
    name: str
    unit: str
    instances: int
    start: float
    end: float

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


def capacity_at(
    base: Mapping[str, int], reservations: Iterable[Reservation], now: float
) -> dict[str, int]:
    """Base capacity plus the reservations active at `now`, per unit."""
    return _plus(base, (r for r in reservations if r.active(now)))


def most_capacity(
    base: Mapping[str, int], reservations: Iterable[Reservation], now: float
) -> dict[str, int]:
    """An upper bound of the capacity from now on: base plus every reservation not yet over.

    A submitted job is refused only when it could never fit; one that fits only while a
    reservation is active waits for it.
    """
    return _plus(base, (r for r in reservations if r.end > now))


def _plus(base: Mapping[str, int], reservations: Iterable[Reservation]) -> dict[str, int]:
    capacity = dict(base)
    for reservation in reservations:
        capacity[reservation.unit] = capacity.get(reservation.unit, 0) + reservation.instances
    return capacity


def ended(reservations: Iterable[Reservation], now: float) -> list[Reservation]:
    """Reservations whose end has come (the caller knows which it already acted on)."""
    return [r for r in reservations if r.end <= now]


def changes_after(reservations: Iterable[Reservation], now: float) -> list[tuple[float, str]]:
    """Upcoming instants at which capacity changes, with what happens, in time order."""
    upcoming = []
    for r in reservations:
        if r.start > now:
            upcoming.append((r.start, f"+{r.instances} {r.unit} ({r.name} starts)"))
        if r.end > now:
            upcoming.append((r.end, f"-{r.instances} {r.unit} ({r.name} ends)"))
    return sorted(upcoming)
