"""Times, sizes and reasons in words, as the portal's pages say them."""

from __future__ import annotations

from datetime import UTC, datetime


def when(text: str | None, now: datetime | None = None) -> str:
    """An ISO time as "in 12 min", "3 h ago"."""
    if not text:
        return ""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    delta = (moment - (now or datetime.now(UTC))).total_seconds()
    words = span(abs(delta))
    if abs(delta) < 30:
        return "now"
    return f"in {words}" if delta > 0 else f"{words} ago"


def span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def waiting(job: dict) -> str:
    """Why a job waits, its place and its expected start, in the jobs page's words."""
    if not job.get("waiting_because"):
        return ""
    parts = [job["waiting_because"]]
    if job.get("position_in_share"):
        parts.append(f"#{job['position_in_share']} in share, #{job['position_in_queue']} in queue")
    if job.get("estimated_start_at"):
        parts.append(f"starts {when(job['estimated_start_at'])}")
    return " · ".join(parts)


def hours(instance_seconds: float) -> str:
    return f"{instance_seconds / 3600:,.1f}"
