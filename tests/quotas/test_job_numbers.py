"""A job's numbers have one source (scheduler.validation.JOB_NUMBERS): the REST serializer, the
web form, the services and the database all hold the same bounds."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from quotaportal.api.job_serializers import JobSerializer
from quotaportal.jobs.fields import field_errors
from quotaportal.quotas.models import Job
from quotaportal.web.forms.jobs import JobSubmitForm
from scheduler.validation import JOB_NUMBERS
from tests.builders import submit

FIELDS = sorted(JOB_NUMBERS)


@pytest.mark.parametrize("field", FIELDS)
def test_the_serializer_takes_its_bounds_from_the_table(field):
    declared = JobSerializer._declared_fields[field]
    assert (declared.min_value, declared.max_value) == JOB_NUMBERS[field]


@pytest.mark.parametrize("field", [f for f in FIELDS if f in JobSubmitForm.base_fields])
def test_the_web_form_takes_its_bounds_from_the_table(field):
    form_field = JobSubmitForm.base_fields[field]
    assert (form_field.min_value, form_field.max_value) == JOB_NUMBERS[field]


@pytest.mark.parametrize("field", FIELDS)
def test_the_services_refuse_one_past_each_bound(field):
    low, high = JOB_NUMBERS[field]
    valid = {name: bounds[0] for name, bounds in JOB_NUMBERS.items()}
    base = {
        **valid,
        "name": "ok",
        "client_token": None,
        "evaluate_on_exit": [],
        "command": "",
        "tags": {},
        "depends_on": [],
    }
    assert field not in field_errors({**base})
    assert field in field_errors({**base, field: high + 1})
    assert field in field_errors({**base, field: low - 1})


@pytest.mark.parametrize("field", FIELDS)
def test_the_database_refuses_a_row_past_the_upper_bound(people, fleet, field):
    job = submit(people.alice, fleet)
    _, high = JOB_NUMBERS[field]
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(**{field: high + 1})
    Job.objects.filter(pk=job.pk).update(**{field: high})  # the bound itself is allowed
