"""The seam between the tick and what runs jobs: one small interface per service environment
backend (SIMULATED, LOCAL, SLURM, AWS_BATCH), found through a registry keyed by the `Backend`
value. Backends register themselves from their app configs, so this package imports none.
"""

from __future__ import annotations

from datetime import datetime

from quotaportal.quotas.models.connections import ConnectionHealth


class EnvironmentBackend:
    """What the tick asks of a backend. The base class is a backend with nothing to run."""

    # True when the backend's own scheduler dispatches and preempts (AWS Batch): the tick then
    # only explains, storing the planner's pending reasons as predictions, and leaves attempt
    # timeouts and job-state time limits to that scheduler.
    schedules_itself = False
    # True when a preempted attempt has stopped the moment the tick preempts it (nothing to
    # wind down): its preemption completes at once. False: the backend records the completion
    # when the attempt's processes have stopped (LOCAL, after the grace period).
    preemption_stops_at_once = True
    # What bounds capacity below the environment's settings, in words for the pages ("" when
    # nothing does: the settings are the capacity).
    capacity_source = ""
    # The remote scheduler's name in words ("AWS Batch"), for its connection's health.
    remote_name = ""

    def capacity(self, env, limits: dict[str, int]) -> dict[str, int]:
        """C(u) now, given the environment's max_capacity per unit (never more than those)."""
        return limits

    def advance(self, queue, now: datetime) -> int | None:
        """Time-driven state before planning (jobs that started or ended, hosts gone quiet).

        A backend behind a remote API returns how many calls it made (kept on the run)."""
        return None

    def launch(self, queue, job_ids: list[str], now: datetime) -> list[str]:
        """Run the jobs a plan started (in plan order); return those it could not place,
        after putting them back to RUNNABLE."""
        return []

    def accepts_work(self, env) -> bool:
        """Can the backend start and stop jobs now? False while its remote end is unreachable
        (Slurm down): the tick then explains the queue without starting or preempting, so
        nothing is decided that could not be carried out."""
        return True

    def health_notes(self, env) -> list[str]:
        """What the pages say of the backend's side beyond its connection, a line each (a
        Slurm cluster's nodes and the jobs the portal did not start)."""
        return []

    def health(self, env) -> ConnectionHealth | None:
        """How the connection to a remote scheduler is going, or None for a backend with no
        remote end (or none tried yet)."""
        return None

    def next_change(self, queue, now: datetime) -> datetime | None:
        """When the backend's own state next changes by itself, with no report to announce
        it (a SIMULATED job's start or end): the tick is asked for at that instant, just as
        an agent's exit report asks for one at once. None: nothing is due by itself."""
        return None


_REGISTRY: dict[str, EnvironmentBackend] = {}
_NOTHING = EnvironmentBackend()


def register(backend: str, implementation: EnvironmentBackend) -> None:
    _REGISTRY[backend] = implementation


def backend_for(env) -> EnvironmentBackend:
    return _REGISTRY.get(env.backend, _NOTHING)


def self_scheduling_backends() -> list[str]:
    """Backend values whose own scheduler runs their queues (their state is pushed and their
    jobs pulled even while a queue is DISABLED)."""
    return [value for value, backend in _REGISTRY.items() if backend.schedules_itself]
