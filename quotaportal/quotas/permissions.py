"""Who may do what. Services call these, so every interface enforces the same rules.

Platform admins (staff) change environments, queues and shares and may act on any job.
Team members submit to their team's shares and act only on their teams' jobs. The system
actor (None: the scheduler, the agents, management commands) may do anything.
"""

from __future__ import annotations

from quotaportal.quotas.errors import Forbidden


def is_platform_admin(user) -> bool:
    return user is None or bool(user.is_active and (user.is_staff or user.is_superuser))


def team_ids(user) -> set[int]:
    if user is None or not user.is_authenticated:
        return set()
    cached = getattr(user, "_qp_team_ids", None)
    if cached is None:
        cached = set(user.teams.values_list("id", flat=True))
        user._qp_team_ids = cached
    return cached


def require_admin(user, action: str) -> None:
    if not is_platform_admin(user):
        raise Forbidden(f"only admins can {action}")


def require_share_member(user, share) -> None:
    if not is_platform_admin(user) and share.team_id not in team_ids(user):
        raise Forbidden(
            f"you are not a member of team {share.team.name}, which owns share {share.name}"
        )


def can_change_job(user, job) -> bool:
    if is_platform_admin(user):
        return True
    share = job.quota_share
    return (share is not None and share.team_id in team_ids(user)) or job.submitted_by_id == user.id


def can_read_output(user, job) -> bool:
    """A job's output may hold its team's data: only that team, its submitter and admins read it
    (everyone else still sees its status and why it waits)."""
    return can_change_job(user, job)


def require_job_access(user, job) -> None:
    if not can_change_job(user, job):
        raise Forbidden("this job belongs to another team")


def actor_name(user) -> str:
    return "system" if user is None else user.get_username()
