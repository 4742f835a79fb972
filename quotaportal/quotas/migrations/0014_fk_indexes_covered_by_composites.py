"""Three foreign keys lose their single-column indexes, which composite ones already cover:
event_queue_id (job_queue, id), attempt_number_unique (job, number) and
share_name_unique_in_queue (job_queue, name). Every event, attempt and share written kept one
index more for no lookup (a tick that starts a thousand jobs writes a thousand of each).

Only the indexes are dropped (by name, on PostgreSQL and SQLite alike): AlterField alone would
also drop and re-add each foreign key, and re-validating one scans its whole table."""

from django.db import migrations, models

# (index dropped, its table and column; the model and field that lose db_index; the field's
# other options, unchanged)
UNINDEXED = [
    ("quotas_event_job_queue_id_f87ce8f5", "quotas_event", "job_queue_id", "event", "job_queue",
     {"to": "quotas.jobqueue", "blank": True, "null": True}),
    ("quotas_jobattempt_job_id_c0b8415b", "quotas_jobattempt", "job_id", "jobattempt", "job",
     {"to": "quotas.job", "related_name": "attempts"}),
    ("quotas_quotashare_job_queue_id_50f16834", "quotas_quotashare", "job_queue_id",
     "quotashare", "job_queue", {"to": "quotas.jobqueue", "related_name": "quota_shares"}),
]


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0013_open_attempts_indexed"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{index}" ON "{table}" ("{column}")',
                )
                for index, table, column, *_ in UNINDEXED
            ],
            state_operations=[
                migrations.AlterField(
                    model_name=model,
                    name=field,
                    field=models.ForeignKey(
                        db_index=False, on_delete=models.CASCADE, **options
                    ),
                )
                for *_, model, field, options in UNINDEXED
            ],
        ),
    ]
