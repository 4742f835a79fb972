"""Each queue keeps the utilization sample its ticks last wrote, so a tick compares usage
without reading the history; filled here from each queue's newest sample."""

from django.db import migrations, models


def remember_newest_samples(apps, schema_editor):
    JobQueue = apps.get_model("quotas", "JobQueue")
    UtilizationSample = apps.get_model("quotas", "UtilizationSample")
    for queue in JobQueue.objects.all():
        newest = UtilizationSample.objects.filter(job_queue=queue).order_by("-time").first()
        if newest is not None:
            JobQueue.objects.filter(pk=queue.pk).update(
                sampled_used=newest.used, sampled_at=newest.time
            )


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0011_job_indexes_not_repeated"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobqueue",
            name="sampled_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="jobqueue",
            name="sampled_used",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(remember_newest_samples, migrations.RunPython.noop),
    ]
