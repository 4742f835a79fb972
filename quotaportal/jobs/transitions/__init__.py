"""Every change of a job's status, one function each, one implementation for both databases:
dispatched by a plan (`dispatch`), handed to its hosts (`mark_starting`), running
(`mark_started_in_bulk`), succeeded (`succeed_in_bulk`), failed or retried (`end_attempt`),
preempted (`preempt`) and back in line once its preempted attempt stopped
(`preemptions_completed`), returned unplaced (`return_unplaced`).

Each changes only the jobs still in the status it changes from (an UPDATE … RETURNING, or a
locked read where the new status depends on the row), so a stale or replayed report (an
agent retrying, a tick racing a termination) changes nothing; then writes their attempts and
events in bulk, whatever the number of jobs (a tick that starts a thousand, a batch of
reports that ends two).
"""

from quotaportal.jobs.transitions.ends import end_attempt, finish_job, succeed_in_bulk
from quotaportal.jobs.transitions.preemptions import (
    PREEMPTED_REASONS,
    PREEMPTION_EVENTS,
    PREEMPTION_REASONS,
    RECENT_PREEMPTIONS_KEPT,
    RETRIES_EXHAUSTED,
    preempt,
    preemptions_completed,
)
from quotaportal.jobs.transitions.starts import (
    NOT_YET_RUNNING,
    START_REASONS,
    dispatch,
    mark_started,
    mark_started_in_bulk,
    mark_starting,
    return_unplaced,
)

__all__ = [
    "NOT_YET_RUNNING",
    "PREEMPTED_REASONS",
    "PREEMPTION_EVENTS",
    "PREEMPTION_REASONS",
    "RECENT_PREEMPTIONS_KEPT",
    "RETRIES_EXHAUSTED",
    "START_REASONS",
    "dispatch",
    "end_attempt",
    "finish_job",
    "mark_started",
    "mark_started_in_bulk",
    "mark_starting",
    "preempt",
    "preemptions_completed",
    "return_unplaced",
    "succeed_in_bulk",
]
