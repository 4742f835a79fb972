"""Every operation of the endpoint: loading the modules fills the registry's OPERATIONS."""

from __future__ import annotations

from quotaportal.awsbatch.endpoint.operations import jobs, resources, shares, snapshot
from quotaportal.awsbatch.endpoint.operations.registry import OPERATIONS

__all__ = ["OPERATIONS", "jobs", "resources", "shares", "snapshot"]
