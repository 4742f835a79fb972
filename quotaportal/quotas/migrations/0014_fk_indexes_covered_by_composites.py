"""Three foreign keys lose their single-column indexes, which composite ones already cover:
event_queue_id (job_queue, id), attempt_number_unique (job, number) and
share_name_unique_in_queue (job_queue, name). Every event, attempt and share written kept one
index more for no lookup (a tick that starts a thousand jobs writes a thousand of each).

Only the indexes are dropped (by name, on PostgreSQL and SQLite alike): AlterField alone would
also drop and re-add each foreign key, and re-validating one scans its whole table."""

import django.db.models.deletion
from django.db import migrations, models

DROPPED = [
    ("quotas_event_job_queue_id_f87ce8f5", "quotas_event", "job_queue_id"),
    ("quotas_jobattempt_job_id_c0b8415b", "quotas_jobattempt", "job_id"),
    ("quotas_quotashare_job_queue_id_50f16834", "quotas_quotashare", "job_queue_id"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0013_open_attempts_indexed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for name, table, column in DROPPED
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="job_queue",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="quotas.jobqueue",
                    ),
                ),
                migrations.AlterField(
                    model_name="jobattempt",
                    name="job",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempts",
                        to="quotas.job",
                    ),
                ),
                migrations.AlterField(
                    model_name="quotashare",
                    name="job_queue",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="quota_shares",
                        to="quotas.jobqueue",
                    ),
                ),
            ],
        ),
    ]
