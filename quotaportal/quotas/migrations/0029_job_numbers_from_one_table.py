"""A job's numbers checked by the database from the one table the forms, serializers and
services read (scheduler.validation.JOB_NUMBERS): upper bounds join the lower ones. A row
above a new bound could only have come through a path that did not check it; it is brought
to the bound first, so the constraint can be added."""

from django.conf import settings
from django.db import migrations, models


# The bounds as they stand when this migration was written (the table may change later; a
# migration must not).
BOUNDS = {
    "quantity": 100_000,
    "preemption_retries_before_termination": 1_000_000,
    "attempt_duration_seconds": 10_000_000,
    "simulated_duration_seconds": 10_000_000,
}


def bring_within_bounds(apps, schema_editor):
    Job = apps.get_model("quotas", "Job")
    for field, high in BOUNDS.items():
        Job.objects.filter(**{f"{field}__gt": high}).update(**{field: high})


class Migration(migrations.Migration):

    dependencies = [
        ('quotas', '0028_tick_memo'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(bring_within_bounds, migrations.RunPython.noop),
        migrations.RemoveConstraint(
            model_name='job',
            name='job_quantity_at_least_1',
        ),
        migrations.RemoveConstraint(
            model_name='job',
            name='job_priority_range',
        ),
        migrations.RemoveConstraint(
            model_name='job',
            name='job_retry_range',
        ),
        migrations.RemoveConstraint(
            model_name='job',
            name='job_attempt_duration_positive',
        ),
        migrations.RemoveConstraint(
            model_name='job',
            name='job_simulated_duration_not_negative',
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('scheduling_priority__gte', 0), ('scheduling_priority__lte', 9999)), name='job_scheduling_priority_bounds'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('quantity__gte', 1), ('quantity__lte', 100000)), name='job_quantity_bounds'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(('retry_attempts__gte', 1), ('retry_attempts__lte', 10)), name='job_retry_attempts_bounds'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('preemption_retries_before_termination__gte', 0), ('preemption_retries_before_termination__lte', 1000000)), ('preemption_retries_before_termination__isnull', True), _connector='OR'), name='job_preemption_retries_before_termination_bounds'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('attempt_duration_seconds__gte', 1), ('attempt_duration_seconds__lte', 10000000)), ('attempt_duration_seconds__isnull', True), _connector='OR'), name='job_attempt_duration_seconds_bounds'),
        ),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('simulated_duration_seconds__gte', 0), ('simulated_duration_seconds__lte', 10000000)), ('simulated_duration_seconds__isnull', True), _connector='OR'), name='job_simulated_duration_seconds_bounds'),
        ),
    ]
