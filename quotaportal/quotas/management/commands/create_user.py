"""manage.py create_user USERNAME [--team T ...] [--admin] [--password P]; token printed last."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from quotaportal.quotas import services


class Command(BaseCommand):
    help = "Create or update a user, put them in teams, and print their API token as the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--team", action="append", default=[], help="team to join (repeatable)")
        parser.add_argument(
            "--admin", action="store_true", help="platform admin (may change shares)"
        )
        parser.add_argument("--password", help="password for signing in to the web pages")

    def handle(self, *args, username, team, admin, password, **options):
        if not username.strip():
            raise CommandError("USERNAME must not be empty")
        user, token = services.create_user(username, teams=team, admin=admin, password=password)
        role = "admin" if admin else "member"
        teams = ", ".join(team) or "no teams"
        self.stdout.write(f"user {user.username} ({role}, {teams})")
        self.stdout.write(token)
