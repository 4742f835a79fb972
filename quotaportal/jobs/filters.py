"""The filters of the job lists, one FilterSet for the REST API (`/api/v1/jobs/`) and the web
page (`/jobs/`): by queue, share, status (any case), name (a part of it, any case), who
submitted it (`user`, a username), "my teams only", and the order (`sort`: submitted,
priority or status; `-` first for descending)."""

from __future__ import annotations

import django_filters
from django import forms

from quotaportal.quotas import selectors
from quotaportal.quotas.models import JobStatus, shown_status_is

YES = ("1", "true", "yes", "on")


class StatusField(forms.CharField):
    def clean(self, value):
        value = (super().clean(value) or "").upper()
        if value and value not in JobStatus.values:
            raise forms.ValidationError(f"status must be one of {', '.join(JobStatus.values)}")
        return value


class StatusFilter(django_filters.CharFilter):
    """By the status people see (Job.shown_status): RUNNING takes in a preempted job whose
    ranks still stop."""

    field_class = StatusField

    def filter(self, queryset, value):
        return queryset.filter(shown_status_is(value)) if value else queryset


class JobFilter(django_filters.FilterSet):
    job_queue = django_filters.CharFilter(field_name="job_queue__name", label="Queue")
    quota_share = django_filters.CharFilter(field_name="share_name", label="Share")
    status = StatusFilter(field_name="status", label="Status")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name")
    user = django_filters.CharFilter(field_name="submitted_by__username", label="Submitted by")
    mine = django_filters.CharFilter(method="only_my_teams", label="Only my teams' jobs")
    array = django_filters.UUIDFilter(field_name="array_id", label="Array")
    sort = django_filters.OrderingFilter(
        fields=(
            ("created_at", "submitted"),
            ("scheduling_priority", "priority"),
            ("status", "status"),
        ),
        label="Sort",
    )

    def only_my_teams(self, queryset, name, value):
        if value.lower() not in YES:
            return queryset
        return selectors.jobs_of_user_teams(self.request.user, queryset)
