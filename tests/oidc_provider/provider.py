"""Run the test provider: `python -m tests.oidc_provider.provider seed FILE` (users, their
groups and the portal's client, from JSON; run again to change groups), then
`... serve PORT` (a threaded WSGI server; prints `ready` once it listens).
QP_TEST_OIDC_DB names its SQLite file; QP_TEST_OIDC_ISSUER its issuer URL."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")


class ThreadedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


def seed(path: str) -> None:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0)
    spec = json.loads(Path(path).read_text())
    for person in spec["users"]:
        user, _ = User.objects.get_or_create(username=person["username"])
        user.email = person.get("email", "")
        user.set_password(person["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in person["groups"]])
    client = spec["client"]
    Application.objects.filter(client_id=client["id"]).delete()
    Application.objects.create(
        name="quotaportal",
        client_id=client["id"],
        client_secret=client["secret"],
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=client["redirect_uri"],
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


def serve(port: int) -> None:
    from django.core.wsgi import get_wsgi_application

    server = make_server(
        "127.0.0.1", port, get_wsgi_application(), ThreadedServer, handler_class=QuietHandler
    )
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    import django

    django.setup()
    command, argument = sys.argv[1], sys.argv[2]
    seed(argument) if command == "seed" else serve(int(argument))
