"""manage.py agent_tokens list [--environment ENV] | revoke PREFIX_OR_ID"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from quotaportal.hosts import services
from quotaportal.hosts.models import AgentToken
from quotaportal.quotas.errors import ServiceError
from quotaportal.quotas.models import ServiceEnvironment


class Command(BaseCommand):
    help = "List agent tokens, or revoke one (its hosts go LOST at once and their jobs fail over)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser("list", help="every token: prefix, environment, host, state")
        listing.add_argument("--environment", default="")
        revoke = actions.add_parser("revoke", help="revoke a token by its id or its prefix")
        revoke.add_argument("token", help="the id or the first characters shown by 'list'")

    def handle(self, *args, action, **options):
        if action == "list":
            self.list(options["environment"])
        else:
            self.revoke(options["token"])

    def list(self, environment: str) -> None:
        env = None
        if environment:
            env = ServiceEnvironment.objects.filter(name=environment).first()
            if env is None:
                raise CommandError(f"service environment {environment} does not exist")
        self.stdout.write(f"{'id':>5}  {'prefix':8}  {'environment':16}  {'host':24}  state")
        for token in services.agent_tokens(None, env):
            state = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked else "active"
            host = token.host_name or "(unbound)"
            self.stdout.write(
                f"{token.id:>5}  {token.prefix:8}  {token.environment.name:16}  {host:24}  {state}"
            )

    def revoke(self, key: str) -> None:
        matches = self.matching(key)
        if len(matches) != 1:
            found = "no token" if not matches else f"{len(matches)} tokens"
            raise CommandError(
                f"{found} match {key!r}; give an id or a whole prefix from 'agent_tokens list'"
            )
        try:
            token = services.revoke_agent_token(None, matches[0])
        except ServiceError as err:
            raise CommandError(err.message) from None
        hosts = ", ".join(token.host_names) or "no host"
        self.stdout.write(f"revoked {token.prefix}… ({hosts} now LOST)")

    @staticmethod
    def matching(key: str) -> list[AgentToken]:
        # A hex prefix can be all digits, so a digit key may name an id or a prefix; when it
        # names two tokens the caller is told to give the whole prefix instead of guessing.
        wanted = Q(prefix__startswith=key.lower())
        if key.isdigit():
            wanted |= Q(id=int(key))
        return list(AgentToken.objects.filter(wanted))
