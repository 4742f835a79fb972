"""manage.py create_aws_key USERNAME: an access key pair for the AWS-compatible endpoint.

The last line printed is `ACCESS_KEY_ID SECRET_ACCESS_KEY`, so scripts can read it with
`read -r AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY < <(... | tail -1)`.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from quotaportal.awsbatch import keys
from quotaportal.quotas.errors import ServiceError


class Command(BaseCommand):
    help = "Create an access key pair for a user of the AWS Batch-compatible endpoint."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}; create it with create_user first")
        try:
            key, secret = keys.create_access_key(None, user)
        except ServiceError as err:
            raise CommandError(err.message) from None
        self.stderr.write(
            f"Access key for {username} (the secret is shown only now). Use with "
            "AWS_ENDPOINT_URL_BATCH=http://HOST:8000/aws/batch:"
        )
        self.stdout.write(f"{key.access_key_id} {secret}")
