"""manage.py aws_import: adopt an existing AWS Batch job queue without re-creating it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from quotaportal.awsbatch.sync.client import Refused, Unavailable
from quotaportal.awsbatch.sync.importer import import_queue
from quotaportal.quotas.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Import an AWS Batch job queue with its scheduling policy, service environment, quota "
        "shares and non-final jobs into the portal, as an AWS_BATCH environment. Nothing is "
        "created in AWS. Credentials come from boto3's standard chain (or --profile)."
    )

    def add_arguments(self, parser):
        parser.add_argument("job_queue", help="the AWS job queue's name or ARN")
        parser.add_argument("--region", required=True, help="e.g. us-west-2")
        parser.add_argument("--endpoint-url", default="", help="default: AWS's own endpoint")
        parser.add_argument("--profile", default="", help="a profile of the AWS config files")

    def handle(self, *args, job_queue, region, endpoint_url, profile, **options):
        try:
            queue = import_queue(
                None,
                job_queue,
                region=region,
                endpoint_url=endpoint_url,
                aws_profile=profile,
                progress=self.stdout.write,
            )
        except ServiceError as err:
            raise CommandError(err.message) from None
        except (Unavailable, Refused) as err:
            raise CommandError(f"AWS Batch answered: {err}; nothing was imported") from None
        self.stdout.write(
            f"The portal now syncs job queue {queue.name} on service environment "
            f"{queue.service_environment.name} with AWS Batch."
        )
