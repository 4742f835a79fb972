"""manage.py create_agent_token ENVIRONMENT — print a token agents use to join it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from quotaportal.hosts import services
from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import ServiceEnvironment


class Command(BaseCommand):
    help = (
        "Create a token for quotaportal-agent to join a LOCAL service environment (printed last)."
    )

    def add_arguments(self, parser):
        parser.add_argument("environment")

    def handle(self, *args, environment, **options):
        env = ServiceEnvironment.objects.filter(name=environment).first()
        if env is None:
            raise CommandError(f"service environment {environment} does not exist")
        try:
            token = services.create_agent_token(None, env)
        except ServiceError as err:
            raise CommandError(err.message) from None
        self.stdout.write(token)
