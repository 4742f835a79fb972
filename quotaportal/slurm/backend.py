"""The SLURM backend as the tick sees it: the portal decides every start and preemption, as
on LOCAL; Slurm only places and runs them.

Capacity is what the last look at the cluster found (its usable nodes' GPUs, less what
foreign jobs hold), never more than the environment's max capacity; each tick's look moves
Slurm's starts and ends into the portal; a started job is one sbatch; a preempted one gets
its checkpoint signal, then scancel after the queue's grace period (it shows RUNNING with
PREEMPTION_IN_PROGRESS until Slurm reports it gone). While Slurm cannot be reached the tick
starts and stops nothing (accepts_work), and jobs wait in the portal.
"""

from __future__ import annotations

from quotaportal.quotas.backends import EnvironmentBackend
from quotaportal.slurm.models import SlurmState
from quotaportal.slurm.services import submitting, watching


class SlurmBackend(EnvironmentBackend):
    preemption_stops_at_once = False  # Slurm reports the victim gone after its grace period
    capacity_source = "the usable Slurm nodes (less what other Slurm jobs hold)"
    remote_name = "Slurm"

    def capacity(self, env, limits: dict[str, int]) -> dict[str, int]:
        seen = SlurmState.objects.filter(environment=env).values_list("capacity", flat=True)
        observed = seen.first() or {}
        return {unit: min(count, observed.get(unit, 0)) for unit, count in limits.items()}

    def accepts_work(self, env) -> bool:
        state = SlurmState.objects.filter(environment=env).first()
        return state is not None and state.polled_at is not None and not state.failures

    def advance(self, queue, now) -> int:
        return watching.look(queue, now)

    def launch(self, queue, job_ids: list[str], now) -> list[str]:
        return submitting.launch(queue, job_ids, now)

    def next_change(self, queue, now):
        return watching.next_deadline(queue.service_environment, now)

    def health(self, env) -> SlurmState | None:
        return SlurmState.objects.filter(environment=env).first()

    def health_notes(self, env) -> list[str]:
        state = self.health(env)
        if state is None or state.polled_at is None:
            return []
        return notes_of(state)


def notes_of(state: SlurmState) -> list[str]:
    """The nodes and the foreign jobs the last look saw, in a line or two."""
    usable = [n for n in state.nodes if n["usable"]]
    out = [n for n in state.nodes if not n["usable"]]
    lines = [f"{len(usable)} of {len(state.nodes)} nodes take jobs"]
    if out:
        lines[0] += ": " + ", ".join(
            f"{n['name']} {n['state']}" + (f" ({n['reason']})" if n["reason"] else "")
            for n in out[:5]
        )
    if state.foreign:
        gpus = sum(j["gpus"] for j in state.foreign)
        shown = ", ".join(
            f"{j['job_id']} ({j['user']}, {j['gpus']} GPUs)" for j in state.foreign[:5]
        )
        more = f" and {len(state.foreign) - 5} more" if len(state.foreign) > 5 else ""
        lines.append(
            f"{len(state.foreign)} job(s) not started by the portal hold {gpus} GPUs: "
            f"{shown}{more} (never preempted by the portal)"
        )
    return lines
