from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from quotaportal.web.views import account, dashboard, jobs, pages, shares, whatif

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/", jobs.job_list, name="job-list"),
    path("jobs/new/", jobs.job_submit, name="job-submit"),
    path("jobs/<uuid:pk>/", jobs.job_detail, name="job-detail"),
    path("jobs/<uuid:pk>/priority/", jobs.job_priority, name="job-priority"),
    path("jobs/<uuid:pk>/terminate/", jobs.job_terminate, name="job-terminate"),
    path("shares/", shares.share_list, name="share-list"),
    path("shares/new/", shares.share_edit, name="share-create"),
    path("shares/<int:pk>/edit/", shares.share_edit, name="share-edit"),
    path("shares/<int:pk>/toggle/", shares.share_toggle, name="share-toggle"),
    path("shares/<int:pk>/delete/", shares.share_delete, name="share-delete"),
    path("hosts/", pages.host_list, name="host-list"),
    path("hosts/<int:pk>/state/", pages.host_state, name="host-state"),
    path("hosts/<int:pk>/release/", pages.host_release, name="host-release"),
    path("hosts/<int:pk>/delete/", pages.host_delete, name="host-delete"),
    path("agent-tokens/<int:pk>/revoke/", pages.agent_token_revoke, name="agent-token-revoke"),
    path("environments/<int:pk>/agent-token/", pages.agent_token, name="agent-token"),
    path("audit/", pages.audit_log, name="audit-log"),
    path("account/aws-keys/", account.aws_keys, name="aws-keys"),
    path("account/aws-keys/<int:pk>/revoke/", account.aws_key_revoke, name="aws-key-revoke"),
    path("what-if/", whatif.what_if_index, name="what-if"),
    path("what-if/queues/<int:queue_id>/", whatif.what_if_draft, name="what-if-draft"),
    path("what-if/<uuid:pk>/", whatif.what_if_run, name="what-if-run"),
    path("what-if/<uuid:pk>/apply/", whatif.what_if_apply, name="what-if-apply"),
    path("what-if/<uuid:pk>/discard/", whatif.what_if_discard, name="what-if-discard"),
]
