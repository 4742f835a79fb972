"""boto3 clients for AWS_BATCH environments, and the one door every call goes through.

Credentials come from boto3's standard chain (environment variables, a named profile from
the shared config files, an instance or task role): nothing secret is read from the database.
botocore's own retries are off; a throttled or failing AWS makes the sync stop and back off
(backend.py), so a tick never sleeps while holding its environment's lock.
"""

from __future__ import annotations

import threading
import time

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

# Throttling and server-side faults: wait and try again later. Everything else AWS refuses
# (ClientException: a name that does not exist, a payload it will not take) is final.
RETRYABLE_CODES = {
    "TooManyRequestsException",
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "ServerException",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
}
WRITES = ("create_", "update_", "delete_", "submit_", "terminate_", "tag_", "untag_")


class Unavailable(Exception):
    """AWS could not be reached, was throttling, or failed on its side."""


class BudgetSpent(Exception):
    """This tick made as many calls as it may; the rest waits for the next tick."""


class Refused(Exception):
    """AWS answered the call with a client error (its message says why)."""

    def __init__(self, operation: str, code: str, message: str):
        super().__init__(f"{operation}: {code}: {message}")
        self.code, self.message = code, message

    @property
    def not_found(self) -> bool:
        text = self.message.lower()
        return "does not exist" in text or "not found" in text


_clients: dict[int, tuple[tuple, object]] = {}
_lock = threading.Lock()


def new_client(region: str, endpoint_url: str = "", aws_profile: str = ""):
    """A boto3 Batch client with the standard credential chain (or the named profile)."""
    session = boto3.session.Session(profile_name=aws_profile or None, region_name=region or None)
    return session.client(
        "batch",
        endpoint_url=endpoint_url or None,
        config=Config(
            retries={"total_max_attempts": 1},
            connect_timeout=3,
            read_timeout=10,
            user_agent_extra="quotaportal",
        ),
    )


def client_for(env):
    """The environment's client, made once per process per configuration (making one reads
    the credential chain and the service model: too slow for every tick)."""
    key = (env.region, env.endpoint_url, env.aws_profile)
    with _lock:
        cached = _clients.get(env.pk)
        if cached is not None and cached[0] == key:
            return cached[1]
        client = new_client(*key)
        _clients[env.pk] = (key, client)
        return client


def use_client(env, client) -> None:
    """Make `client` the environment's client (a botocore Stubber's, in tests)."""
    with _lock:
        _clients[env.pk] = ((env.region, env.endpoint_url, env.aws_profile), client)


def forget_clients() -> None:
    with _lock:
        _clients.clear()


class Caller:
    """Makes the calls of one sync, counting them against a budget.

    With `dry_run`, calls that would change AWS are recorded in `writes` and answered with
    `fake(operation, params)` instead of being sent (aws_sync_check).
    """

    def __init__(self, client, budget: int, *, dry_run: bool = False, seconds: float | None = None):
        self.client, self.budget, self.dry_run = client, budget, dry_run
        self.calls = 0
        self.writes: list[tuple[str, dict]] = []
        # A slow AWS must not hold the environment's tick lock for long: past this, the sync
        # stops as if its budget were spent and the rest waits for the next tick.
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def pretended(self, operation: str) -> bool:
        """Did this check (dry run) pretend to send `operation`? Then AWS has not got what it
        would have made, and reading it back there would fail."""
        return any(name == operation for name, _ in self.writes)

    @property
    def left(self) -> int:
        return self.budget - self.calls

    def __call__(self, operation: str, **params) -> dict:
        if self.dry_run and operation.startswith(WRITES):
            self.writes.append((operation, params))
            return fake_answer(operation, params)
        if self.calls >= self.budget or (
            self.deadline is not None and time.monotonic() > self.deadline
        ):
            raise BudgetSpent(operation)
        self.calls += 1
        try:
            return getattr(self.client, operation)(**params)
        except ClientError as err:
            error = err.response.get("Error", {})
            code, message = error.get("Code", "Unknown"), error.get("Message", str(err))
            status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
            if code in RETRYABLE_CODES or status >= 500 or status == 429:
                raise Unavailable(f"{operation}: {code}: {message}") from None
            raise Refused(operation, code, message) from None
        except BotoCoreError as err:  # no connection, a time-out, no credentials found
            raise Unavailable(f"{operation}: {err}") from None

    def pages(self, operation: str, key: str, **params):
        """Every item of a paged list call, page by page (each page is a call)."""
        token = None
        while True:
            answer = self(operation, **params, **({"nextToken": token} if token else {}))
            yield from answer.get(key, [])
            token = answer.get("nextToken")
            if not token:
                return


DRY_RUN_PREFIX = "dry-run-"


FAKE_ARN_KEYS = {
    "create_scheduling_policy": "arn",
    "create_service_environment": "serviceEnvironmentArn",
    "create_job_queue": "jobQueueArn",
    "create_quota_share": "quotaShareArn",
}


def fake_answer(operation: str, params: dict) -> dict:
    """What a dry run pretends a write answered: the ids and ARNs the sync goes on with."""
    if operation == "submit_service_job":
        fake_id = f"{DRY_RUN_PREFIX}{params.get('clientToken', '')}"
        return {"jobId": fake_id, "jobArn": fake_id, "jobName": params.get("jobName")}
    if operation in FAKE_ARN_KEYS:
        return {FAKE_ARN_KEYS[operation]: f"{DRY_RUN_PREFIX}{operation}"}
    return {}
