"""The ticks' memo of each queue moves from the queue's row to its own (TickMemo), with
what every existing queue's ticks remembered."""

import django.db.models.deletion
from django.db import migrations, models


MEMO_FIELDS = [
    "planned_version",
    "planned_dispatched_jobs",
    "planned_at",
    "planned_capacity",
    "fully_planned_at",
    "planned_terms",
    "fully_planned_waiting",
    "sampled_used",
    "sampled_at",
    "fair_use",
]


def memos_from_queues(apps, schema_editor):
    JobQueue = apps.get_model("quotas", "JobQueue")
    TickMemo = apps.get_model("quotas", "TickMemo")
    TickMemo.objects.bulk_create(
        TickMemo(queue_id=row["id"], **{name: row[name] for name in MEMO_FIELDS})
        for row in JobQueue.objects.values("id", *MEMO_FIELDS)
    )


def memos_back_to_queues(apps, schema_editor):
    JobQueue = apps.get_model("quotas", "JobQueue")
    TickMemo = apps.get_model("quotas", "TickMemo")
    for row in TickMemo.objects.values("queue_id", *MEMO_FIELDS):
        JobQueue.objects.filter(pk=row.pop("queue_id")).update(**row)


class Migration(migrations.Migration):

    dependencies = [
        ('quotas', '0027_estimate_reads'),
    ]

    operations = [
        migrations.CreateModel(
            name='TickMemo',
            fields=[
                ('queue', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='tick_memo', serialize=False, to='quotas.jobqueue')),
                ('planned_version', models.BigIntegerField(default=-1)),
                ('planned_dispatched_jobs', models.IntegerField(blank=True, null=True)),
                ('planned_at', models.DateTimeField(blank=True, null=True)),
                ('planned_capacity', models.JSONField(blank=True, null=True)),
                ('fully_planned_at', models.DateTimeField(blank=True, null=True)),
                ('planned_terms', models.CharField(blank=True, max_length=64)),
                ('fully_planned_waiting', models.IntegerField(blank=True, null=True)),
                ('sampled_used', models.JSONField(blank=True, null=True)),
                ('sampled_at', models.DateTimeField(blank=True, null=True)),
                ('fair_use', models.JSONField(blank=True, default=dict)),
            ],
        ),
        migrations.RunPython(memos_from_queues, memos_back_to_queues),
        migrations.RemoveField(
            model_name='jobqueue',
            name='fair_use',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='fully_planned_at',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='fully_planned_waiting',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='planned_at',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='planned_capacity',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='planned_dispatched_jobs',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='planned_terms',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='planned_version',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='sampled_at',
        ),
        migrations.RemoveField(
            model_name='jobqueue',
            name='sampled_used',
        ),
    ]
