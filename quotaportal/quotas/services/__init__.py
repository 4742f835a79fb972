"""Every write goes through these functions: web, REST, AWS endpoint, agents and the tick."""

from __future__ import annotations

from quotaportal.jobs.arrays import set_array_priority, submit_array, terminate_array
from quotaportal.jobs.transitions import end_attempt, finish_job, mark_started
from quotaportal.jobs.user_actions import set_priority, submit_job, submit_jobs, terminate_job
from quotaportal.quotas.services.environments import (
    create_service_environment,
    update_service_environment,
)
from quotaportal.quotas.services.queues import (
    create_job_queue,
    create_scheduling_policy,
    update_job_queue,
)
from quotaportal.quotas.services.resources import (
    add_member,
    create_capacity_unit,
    create_team,
    create_user,
    delete_resource,
)
from quotaportal.quotas.services.shares import create_share, delete_share, update_share
from quotaportal.quotas.services.tags import tag_resource, untag_resource

__all__ = [
    "add_member",
    "create_capacity_unit",
    "create_job_queue",
    "create_scheduling_policy",
    "create_service_environment",
    "create_share",
    "create_team",
    "create_user",
    "delete_resource",
    "delete_share",
    "end_attempt",
    "finish_job",
    "mark_started",
    "set_array_priority",
    "set_priority",
    "submit_array",
    "submit_job",
    "submit_jobs",
    "tag_resource",
    "terminate_array",
    "terminate_job",
    "untag_resource",
    "update_job_queue",
    "update_service_environment",
    "update_share",
]
