"""Builders the agent-side tests share."""

from __future__ import annotations


def rank(placement: int, command: str, gpu: int = 0) -> dict:
    """What an answer lists for one rank, as RunningJob takes it."""
    return {
        "placement": placement,
        "job_id": f"job-{placement}",
        "attempt": 1,
        "rank": 0,
        "world_size": 1,
        "master_addr": "",
        "gpu_indices": [gpu],
        "command": command,
        "grace_seconds": 1,
        "hold": False,
    }
