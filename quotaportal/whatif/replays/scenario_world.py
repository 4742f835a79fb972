"""Scenario world backed by the whole control plane: services, database and the real tick.

Each scenario gets its own SIMULATED service environment and job queue (names carry a run
id), so scenarios never see each other's jobs. Used by `manage.py run_scenario` and the tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from quotaportal.quotas import services
from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import (
    DISPATCHED,
    CapacityUnit,
    Event,
    EventKind,
    Job,
    QuotaShare,
    SchedulerRun,
    ServiceEnvironment,
)
from quotaportal.quotas.services import fairness, reservations
from quotaportal.tick.run import run_tick
from scheduler.scenarios.format import START_TIME, Scenario
from scheduler.scenarios.world import DISPATCHED as SCENARIO_DISPATCHED
from scheduler.scenarios.world import Observation, StepRejected

SHARE_FIELDS = {
    "limits": "capacity_limits",
    "strategy": "sharing_strategy",
    "borrow_limit": "borrow_limit",
    "in_share_preemption": "in_share_preemption",
    "state": "state",
}


def at(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def _units(names) -> None:
    for name in names:
        CapacityUnit.objects.get_or_create(name=name)


class DbWorld:
    """`backend` runs the scenario's jobs (SIMULATED by default; a SLURM world's tests give
    `prepare`, called with the new environment, and the `command` its jobs run)."""

    def __init__(
        self,
        scenario: Scenario,
        backend: str = "SIMULATED",
        prepare: Callable[[ServiceEnvironment], None] | None = None,
        command: str = "",
    ):
        run = uuid.uuid4().hex[:8]
        _units(set(scenario.capacity) | {u for s in scenario.shares for u in s.limits})
        env = services.create_service_environment(
            None,
            name=f"scenario-{run}",
            capacity_limits=dict(scenario.capacity),
            backend=backend,
        )
        if prepare is not None:
            prepare(env)
        self.command = command
        policy = services.create_scheduling_policy(None, name=f"scenario-{run}")
        self.queue = services.create_job_queue(
            None,
            name=f"scenario-{run}",
            scheduling_policy=policy,
            service_environment=env,
            ordering=scenario.ordering.value,
        )
        self.env = env
        team = services.create_team(None, name=f"scenario-{run}")
        for spec in scenario.shares:
            services.create_share(
                None,
                job_queue=self.queue,
                name=spec.name,
                team=team,
                capacity_limits=dict(spec.limits),
                sharing_strategy=spec.strategy.value,
                borrow_limit=spec.borrow_limit if spec.borrow_limit != -1 else None,
                in_share_preemption=spec.in_share_preemption,
                state="ENABLED" if spec.enabled else "DISABLED",
            )
        if (fair := scenario.fair_share) is not None:
            self._fair_share(fair)
        self.ids: dict[str, uuid.UUID] = {}
        self.last_preempted: dict[str, str] = {}
        self.violations: list[str] = []

    def _fair_share(self, fair) -> None:
        """The scenario's policy, its weights, and each share's history as of its start."""
        for name, weight in fair.weights.items():
            share = QuotaShare.objects.get(job_queue=self.queue, name=name)
            services.update_share(None, share, fair_share_weight=weight)
        self.queue = fairness.set_fair_share(
            None,
            self.queue,
            half_life_seconds=round(fair.half_life),
            counts=fair.counts,
            seed=fair.history,
            now=at(START_TIME),
        )

    def _job(self, name: str) -> Job:
        if name not in self.ids:
            raise StepRejected(f"no job named {name}")
        return Job.objects.get(pk=self.ids[name])

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ServiceError as err:
            raise StepRejected("; ".join(err.errors.values())) from None

    def submit(self, now, job, share, unit, quantity, priority, preemption_retries, after=()):
        if job in self.ids:
            raise StepRejected(f"a job named {job} was already submitted")
        unknown = sorted(name for name, _ in after if name not in self.ids)
        if unknown:
            raise StepRejected(f"it depends on jobs that do not exist: {', '.join(unknown)}")
        depends_on = [{"job_id": str(self.ids[name]), "type": kind} for name, kind in after]
        created = self._call(
            services.submit_job,
            None,
            job_queue=self.queue,
            quota_share=share,
            capacity_unit=unit,
            name=job,
            quantity=quantity,
            scheduling_priority=priority,
            preemption_retries_before_termination=preemption_retries,
            command=self.command,
            depends_on=depends_on,
            now=at(now),
        )
        self.ids[job] = created.id

    def tick(self, now):
        run = run_tick(self.queue.id, now=at(now))
        self.violations = [run.error] if run.error else []
        names = {v: k for k, v in self.ids.items()}
        kinds = {
            EventKind.PREEMPTED_CROSS_SHARE: "cross_share",
            EventKind.PREEMPTED_IN_SHARE: "in_share",
            EventKind.PREEMPTED_CAPACITY: "capacity",
        }
        self.last_preempted = {
            names[job_id]: kinds[kind]
            for job_id, kind in Event.objects.filter(
                job_queue=self.queue, time=at(now), kind__in=list(kinds)
            ).values_list("job_id", "kind")
        }

    def set_priority(self, now, job, priority):
        self._call(services.set_priority, None, self._job(job), priority)

    def finish(self, now, job, status):
        if self._call(services.finish_job, self._job(job), status, now=at(now)) is None:
            raise StepRejected(f"job {job} is not dispatched, so it cannot finish")

    def terminate(self, now, job):
        self._call(
            services.terminate_job, None, self._job(job), "Terminated by scenario", now=at(now)
        )

    def update_share(self, now, share, changes):
        target = QuotaShare.objects.filter(job_queue=self.queue, name=share).first()
        if target is None:
            raise StepRejected(f"quota share {share} does not exist")
        if "limits" in changes:
            _units(changes["limits"])
        self._call(
            services.update_share, None, target, **{SHARE_FIELDS[k]: v for k, v in changes.items()}
        )

    def set_capacity(self, now, capacity):
        _units(capacity)
        self._call(
            services.update_service_environment, None, self.env, capacity_limits=dict(capacity)
        )

    def reserve(self, now, reservation):
        _units([reservation.unit])
        self._call(
            reservations.create_reservation,
            None,
            self.env,
            name=reservation.name,
            capacity_unit=reservation.unit,
            instances=reservation.instances,
            starts_at=at(reservation.start),
            ends_at=at(reservation.end),
            now=at(now),
        )

    def observe(self) -> Observation:
        names = {v: k for k, v in self.ids.items()}
        rows = Job.objects.filter(pk__in=list(self.ids.values())).values_list(
            "id",
            "status",
            "share_name",
            "capacity_unit__name",
            "quantity",
            "pending_reason",
            "preempted_count",
        )
        status, usage, pending, preempted = {}, {}, {}, {}
        for share in QuotaShare.objects.filter(job_queue=self.queue).values_list("name", flat=True):
            usage[share] = {}
        for job_id, job_status, share, unit, quantity, reason, count in rows:
            name = names[job_id]
            dispatched = job_status in DISPATCHED
            status[name] = SCENARIO_DISPATCHED if dispatched else job_status
            preempted[name] = count
            if dispatched:
                usage.setdefault(share, {})[unit] = usage.get(share, {}).get(unit, 0) + quantity
            if job_status == "RUNNABLE" and reason:
                pending[name] = reason
        return Observation(
            status, usage, pending, preempted, dict(self.last_preempted), list(self.violations)
        )

    def runs(self) -> int:
        return SchedulerRun.objects.filter(job_queue=self.queue).count()
