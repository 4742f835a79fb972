"""Open attempts (stopped_at IS NULL) get a partial index: placing a started job reads the
slots they hold, at a cost that must not grow with every attempt ever made."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0004_placement_host_exited"),
        ("quotas", "0012_queue_keeps_its_last_sample"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="jobattempt",
            index=models.Index(
                condition=models.Q(("stopped_at__isnull", True)), fields=["id"], name="attempt_open"
            ),
        ),
    ]
