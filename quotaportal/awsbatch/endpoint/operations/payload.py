"""Reading the SageMaker CreateTrainingJob request a service job carries: the capacity it
needs, the command a LOCAL job runs, how long a SIMULATED job runs."""

from __future__ import annotations

from collections import defaultdict

from quotaportal.awsbatch.conventions import SIMULATED_SECONDS_TAG
from quotaportal.awsbatch.endpoint.wire import AwsError, required
from quotaportal.infra.bodies import loads, unstorable_text

MAX_PAYLOAD_BYTES = 256 * 1024
COMMAND_VARIABLE = "QP_COMMAND"  # how a LOCAL job sent through the endpoint says what to run
SAGEMAKER_DEFAULT_MAX_RUNTIME = 86_400  # SageMaker's default StoppingCondition


def read_payload(body: dict) -> dict:
    text = required(body, "serviceRequestPayload")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD_BYTES:
        raise AwsError(f"serviceRequestPayload is larger than {MAX_PAYLOAD_BYTES:,} bytes")
    try:
        payload = loads(text)
    except ValueError as err:
        raise AwsError(f"serviceRequestPayload is not valid JSON: {err}") from None
    if not isinstance(payload, dict):
        raise AwsError("serviceRequestPayload must be a JSON object (a CreateTrainingJob request)")
    if problem := unstorable_text(payload, "serviceRequestPayload"):
        raise AwsError(f"{problem}; remove it and send the request again")
    return payload


def capacity_of(payload: dict) -> tuple[str, int]:
    """The instance type and count a training request needs: ResourceConfig.InstanceType ×
    InstanceCount, or its InstanceGroups summed (one instance type per job)."""
    config = payload.get("ResourceConfig")
    missing = AwsError(
        "serviceRequestPayload needs ResourceConfig with InstanceType and InstanceCount, "
        "or with InstanceGroups"
    )
    if not isinstance(config, dict):
        raise missing
    groups = config.get("InstanceGroups")
    if groups:
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise AwsError("ResourceConfig.InstanceGroups must be a list of objects")
        counts = defaultdict(int)
        for group in groups:
            kind, count = group.get("InstanceType"), group.get("InstanceCount")
            counts[kind] += _instance_count(count, "InstanceGroups[].InstanceCount")
        if len(counts) != 1 or not isinstance(next(iter(counts)), str):
            raise AwsError("ResourceConfig.InstanceGroups must all use one InstanceType")
        return next(iter(counts.items()))
    kind, count = config.get("InstanceType"), config.get("InstanceCount")
    if not isinstance(kind, str) or not kind or count is None:
        raise missing
    return kind, _instance_count(count, "ResourceConfig.InstanceCount")


def _instance_count(value, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise AwsError(f"{where} must be a whole number of at least 1")
    return value


def command_of(payload: dict, local: bool) -> str:
    environment = payload.get("Environment") or {}
    command = environment.get(COMMAND_VARIABLE, "") if isinstance(environment, dict) else ""
    if local and not command:
        raise AwsError(
            "this job queue runs on quotaportal's own GPU hosts: put the command to run in "
            f'serviceRequestPayload Environment["{COMMAND_VARIABLE}"]'
        )
    if not isinstance(command, str):
        raise AwsError(f'Environment["{COMMAND_VARIABLE}"] must be a string')
    return command


def simulated_seconds(payload: dict, tags: dict) -> float:
    if SIMULATED_SECONDS_TAG in tags:
        try:
            seconds = float(tags[SIMULATED_SECONDS_TAG])
        except (TypeError, ValueError):
            seconds = -1
        if not 0 <= seconds < float("inf"):
            raise AwsError(f"tag {SIMULATED_SECONDS_TAG} must be a number of seconds, 0 or more")
        return seconds
    stopping = payload.get("StoppingCondition") or {}
    limit = stopping.get("MaxRuntimeInSeconds") if isinstance(stopping, dict) else None
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return float(limit)
    return float(SAGEMAKER_DEFAULT_MAX_RUNTIME)
