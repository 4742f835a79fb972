"""manage.py create_agent_token ENVIRONMENT [--host NAME] — print a new agent token."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from quotaportal.hosts import services
from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import ServiceEnvironment


class Command(BaseCommand):
    help = (
        "Create an agent token (one host's identity) for a LOCAL service environment; the token "
        "is printed last. Give it to the agent as QP_AGENT_TOKEN or in a --token-file."
    )

    def add_arguments(self, parser):
        parser.add_argument("environment")
        parser.add_argument(
            "--host",
            default="",
            help="the host name it serves (default: the first name that registers with it)",
        )

    def handle(self, *args, environment, host, **options):
        env = ServiceEnvironment.objects.filter(name=environment).first()
        if env is None:
            raise CommandError(f"service environment {environment} does not exist")
        try:
            token = services.create_agent_token(None, env, host)
        except ServiceError as err:
            raise CommandError(err.message) from None
        self.stdout.write(token)
