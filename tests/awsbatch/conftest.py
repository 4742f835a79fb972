"""A live server and boto3 clients signed with real access keys (SigV4 end to end)."""

from __future__ import annotations

import pytest

from quotaportal.awsbatch import keys as key_services
from quotaportal.quotas import services
from quotaportal.quotas.models import JobQueue
from quotaportal.tick.run import run_tick
from tests.awsbatch.builders import batch_client


class Aws:
    """Users with access keys against the live server, and a tick to move time on."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.keys = {}
        self.clients = []

    def user(self, username: str, *, admin: bool = False, teams=()):
        user, _ = services.create_user(username, admin=admin, teams=list(teams))
        key, secret = key_services.create_access_key(None, user)
        self.keys[username] = (key.access_key_id, secret)
        return user

    def client(self, username: str):
        return self.track(batch_client(self.endpoint, *self.keys[username]))

    def track(self, client):
        self.clients.append(client)
        return client

    def close(self) -> None:
        # A kept-alive connection keeps a server thread, and its database session, open.
        for client in self.clients:
            client.close()

    @staticmethod
    def tick(queue_name: str, now=None) -> None:
        run_tick(JobQueue.objects.get(name=queue_name).pk, now=now)


@pytest.fixture
def aws(live_server, transactional_db) -> Aws:
    aws = Aws(f"{live_server.url}/aws/batch")
    aws.user("ada", admin=True)
    aws.user("sam", teams=["qs1", "qs2", "qs3"])
    yield aws
    aws.close()


@pytest.fixture
def admin(aws):
    return aws.client("ada")


@pytest.fixture
def scientist(aws):
    return aws.client("sam")


class StandIn:
    """A second quotaportal, with its own database, playing AWS Batch for the AWS_BATCH
    backend: gunicorn, a Celery worker and beat, its /aws/batch/ endpoint and an admin key."""

    def __init__(self):
        import importlib.util

        from tests.builders import REPO

        spec = importlib.util.spec_from_file_location("qp_stack", REPO / "scripts" / "stack.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.stack = module.Stack("qp_aws_standin", prefix="qp-aws-standin-")
        self.stack.fresh_database()
        self.stack.manage("create_user", "aws-admin", "--admin")
        self.key_id, self.secret = self.stack.manage("create_aws_key", "aws-admin").split()[-2:]
        self.stack.start_services(worker_concurrency=1)
        self.endpoint = f"{self.stack.url}/aws/batch"

    def client(self):
        return batch_client(self.endpoint, self.key_id, self.secret)

    def stop(self) -> None:
        self.stack.stop()


@pytest.fixture(scope="module")
def standin():
    aws = StandIn()
    yield aws
    aws.stop()


@pytest.fixture
def aws_credentials(standin, monkeypatch):
    """boto3's standard chain finds the stand-in's key in the environment, as it would find
    real credentials: the portal stores none."""
    from quotaportal.awsbatch.sync.client import forget_clients

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", standin.key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", standin.secret)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    forget_clients()
    yield standin
    forget_clients()
