"""Celery tasks: thin entry points on top of the tick and the services.

Loading this module (quotas.apps does) registers the tasks with the layers below: the ticks
as the tick's sender, the what-if replays as the what-if service's worker, so
nothing below imports this module.
"""

from __future__ import annotations

from celery import shared_task

from quotaportal.quotas.services.pruning import prune_history
from quotaportal.tick import full_plan, requests
from quotaportal.tick.run import run_tick, run_tick_waiting, tickable_queue_ids
from quotaportal.whatif import estimates
from quotaportal.whatif import runs as whatif

MAX_FOLLOW_UPS = 4  # then the broker carries the next, and other environments get a turn


@shared_task(ignore_result=True)
def tick_queue(queue_id: int) -> None:
    """Beat's tick of the queue's environment: skipped while another tick of it runs, or
    when one ran in the last half period (requests.ticked_lately)."""
    if not requests.ticked_lately(queue_id):
        _with_follow_ups(queue_id, run_tick)


@shared_task(ignore_result=True)
def tick_queue_now(queue_id: int) -> None:
    """A tick asked for by a change: it waits for a tick in progress rather than skipping, and
    spaces the next one after it (requests.TickGate)."""
    _with_follow_ups(queue_id, _spaced_tick)


def _spaced_tick(queue_id: int) -> None:
    # Before reading anything: a change committed from now on must enqueue the next tick.
    requests.gate.started(queue_id)
    run = run_tick_waiting(queue_id)
    if run is not None:
        requests.gate.spaced(queue_id, run.duration_ms / 1000)


@shared_task(ignore_result=True)
def tick_queue_at(queue_id: int) -> None:
    """A tick at an instant (a reservation starts or ends, a SIMULATED job ends): it waits
    for a tick in progress rather than skipping, since the instant matters."""
    _with_follow_ups(queue_id, run_tick_waiting)


def _with_follow_ups(queue_id: int, tick) -> None:
    """The tick, then the ticks it asked for at once (requests.following_up), here."""
    for _ in range(MAX_FOLLOW_UPS):
        with requests.following_up() as due:
            tick(queue_id)
        if not due:
            return
        queue_id, tick = min(due), run_tick_waiting
    for queue_id in due:
        requests.enqueue_tick(queue_id)


@shared_task(ignore_result=True)
def tick_all_queues() -> None:
    """Beat's periodic task: one tick task per queue, so several workers share the queues."""
    for queue_id in tickable_queue_ids():
        tick_queue.delay(queue_id)
    prune_history()


@shared_task(ignore_result=True)
def refresh_all_estimates() -> None:
    """Beat's task: start-time estimates of every queue with jobs waiting."""
    estimates.refresh_paced()


@shared_task(ignore_result=True)
def plan_queues_fully() -> None:
    """Beat's task: the periodic full plan of long queues, outside their tick lock."""
    full_plan.plan_due_queues()


@shared_task(ignore_result=True)
def run_what_if_task(what_if_id: str) -> None:
    """A what-if's two replays; progress goes to its row as they run."""
    whatif.run_what_if(what_if_id)


whatif.use_worker(lambda what_if_id: run_what_if_task.delay(what_if_id))
requests.use_sender(
    requests.Sender(
        now=lambda queue_id: tick_queue_now.delay(queue_id),
        later=lambda queue_id, countdown: tick_queue_now.apply_async(
            (queue_id,), countdown=countdown
        ),
        at=lambda queue_id, eta: tick_queue_at.apply_async((queue_id,), eta=eta),
        eager=lambda: tick_queue_now.app.conf.task_always_eager,
    )
)
