"""The simulator applying a plan: starts, preemptions with their grace period, runs and
ends."""

from __future__ import annotations

from scheduler.model import Job, Plan, PreemptionKind
from scheduler.simulate.engine_state import (
    END,
    START,
    JobOutcome,
    Running,
)


class Dispatching:
    """QueueSimulation's dispatching (a mixin: it reads and writes the simulation's state)."""

    def _apply_plan(self, plan: Plan) -> None:
        preempted_any = False
        for dispatch in plan.dispatches:
            for preemption in dispatch.preempted:
                self._preempt(preemption.job_id, preemption.kind)
                preempted_any = True
            job = self.runnable[dispatch.job_id]
            self._dequeue(job)
            job = job._replace(dispatched_at=self.now)
            self.dispatched[job.id] = self.by_share[job.share][job.id] = job
            self._use(job, +1)
            self.attempt[job.id] += 1
            self.outcomes[job.id].dispatches.append(self.now)
            # Only a tick that changed nothing is a fixed point: from the next tick on this
            # job may be a victim (victims are jobs dispatched before a tick), and its share
            # has a new head, which may reclaim on another unit than this one. The live tick
            # too plans again after any change.
            self.dirty = True
            self._touch_share(job)
            if self.tick_s:
                self.unlaunched.add(job.id)
            elif dispatch.preempted and self.config.grace_s > 0:
                self._push(self.now + self.config.grace_s, START, (job.id, self.attempt[job.id]))
            else:
                self._begin_run(job.id)
        self.preempted_last_tick = preempted_any

    def _preempt(self, job_id: str, kind: PreemptionKind) -> None:
        job = self.dispatched.pop(job_id)
        del self.by_share[job.share][job_id]
        self._use(job, -1)
        self.unlaunched.discard(job_id)
        self.attempt[job_id] += 1
        self.outcomes[job_id].preemptions.append((self.now, kind.value))
        self.run.preemptions[kind.value] += 1
        self._enqueue(job._replace(dispatched_at=None))
        # The victim waits again on its unit and may now head its share: plan them next.
        self._touch_share(job)

    def _launch_unlaunched(self) -> None:
        """Fixed tick: what the last tick dispatched runs from this one (a SIMULATED backend)."""
        for job_id in sorted(self.unlaunched):
            self._begin_run(job_id)
        self.unlaunched.clear()

    def _begin_run(self, job_id: str) -> None:
        outcome = self.outcomes[job_id]
        if outcome.start_s is None:
            outcome.start_s = self.now
            self.unstarted -= 1
        outcome.runs += 1
        # Work done before a preemption is lost: every run takes the whole duration.
        self._push(self.now + self.work[job_id].duration_s, END, (job_id, self.attempt[job_id]))

    def _start_running(self, item: Running) -> None:
        """A job already running when the simulation starts (forward simulation from now)."""
        work = item.job
        self.work[work.id] = work
        self.outcomes[work.id] = JobOutcome(work, start_s=item.dispatched_at_s, runs=1)
        self.attempt[work.id] = 1
        job = Job(
            work.id,
            work.share,
            work.unit,
            work.quantity,
            work.priority,
            work.submit_s,
            item.dispatched_at_s,
        )
        self.dispatched[work.id] = self.by_share[job.share][work.id] = job
        self._use(job, +1)
        self._push(self.now + item.remaining_s, END, (work.id, 1))

    def _end(self, job_id: str) -> None:
        job = self.dispatched.pop(job_id)
        del self.by_share[job.share][job_id]
        self._use(job, -1)
        self.outcomes[job_id].end_s = self.now
        self.jobs_done += 1
        self.dirty = True
        self._touch(job.unit)
