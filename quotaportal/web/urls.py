from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from quotaportal.identity import oidc
from quotaportal.web.views import (
    account,
    arrays,
    audit,
    dashboard,
    fleet,
    hosts,
    jobs,
    notifications,
    shares,
    usage,
    whatif,
)
from quotaportal.web.views.manage import people, resources, slurm

capacity, notices = resources, notifications

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("fleet/", fleet.fleet, name="fleet"),
    path("usage/", usage.usage, name="usage"),
    path("usage/suggest/", usage.usage_suggest, name="usage-suggest"),
    path("login/", account.SignInView.as_view(), name="login"),
    # Single sign-on (identity.oidc): off to the provider, and back.
    path("oidc/authenticate/", oidc.SignIn.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", oidc.Callback.as_view(), name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/", jobs.job_list, name="job-list"),
    path("jobs/new/", jobs.job_submit, name="job-submit"),
    path("jobs/<uuid:pk>/", jobs.job_detail, name="job-detail"),
    path("jobs/<uuid:pk>/priority/", jobs.job_priority, name="job-priority"),
    path("jobs/<uuid:pk>/output/", jobs.job_output, name="job-output"),
    path("jobs/<uuid:pk>/terminate/", jobs.job_terminate, name="job-terminate"),
    path("arrays/", arrays.array_list, name="array-list"),
    path("arrays/<uuid:pk>/", arrays.array_detail, name="array-detail"),
    path("arrays/<uuid:pk>/priority/", arrays.array_priority, name="array-priority"),
    path("arrays/<uuid:pk>/terminate/", arrays.array_terminate, name="array-terminate"),
    path("shares/", shares.share_list, name="share-list"),
    path("shares/new/", shares.share_edit, name="share-create"),
    path("shares/<int:pk>/edit/", shares.share_edit, name="share-edit"),
    path("shares/<int:pk>/toggle/", shares.share_toggle, name="share-toggle"),
    path("shares/<int:pk>/delete/", shares.share_delete, name="share-delete"),
    path("shares/<int:pk>/drift/", shares.share_drift, name="share-drift"),
    path("hosts/", hosts.host_list, name="host-list"),
    path("hosts/<int:pk>/state/", hosts.host_state, name="host-state"),
    path("hosts/<int:pk>/release/", hosts.host_release, name="host-release"),
    path("hosts/<int:pk>/delete/", hosts.host_delete, name="host-delete"),
    path("agent-tokens/<int:pk>/revoke/", hosts.agent_token_revoke, name="agent-token-revoke"),
    path("environments/<int:pk>/agent-token/", hosts.agent_token, name="agent-token"),
    path("audit/", audit.audit_log, name="audit-log"),
    path("account/tokens/", account.api_tokens, name="api-tokens"),
    path("account/tokens/cli/", account.cli_sign_in, name="cli-sign-in"),
    path("account/tokens/<int:pk>/revoke/", account.api_token_revoke, name="api-token-revoke"),
    path("account/tokens/legacy/revoke/", account.legacy_token_revoke, name="legacy-token-revoke"),
    path("account/aws-keys/", account.aws_keys, name="aws-keys"),
    path("account/notifications/", notices.email_preferences, name="account-notifications"),
    path("account/aws-keys/<int:pk>/revoke/", account.aws_key_revoke, name="aws-key-revoke"),
    path("what-if/", whatif.what_if_index, name="what-if"),
    path("what-if/queues/<int:queue_id>/", whatif.what_if_draft, name="what-if-draft"),
    path("what-if/<uuid:pk>/", whatif.what_if_run, name="what-if-run"),
    path("what-if/<uuid:pk>/apply/", whatif.what_if_apply, name="what-if-apply"),
    path("what-if/<uuid:pk>/discard/", whatif.what_if_discard, name="what-if-discard"),
    # Invite links: the user chooses a password (Django's one-use password-reset token).
    path(
        "invite/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name="registration/invite.html", success_url=reverse_lazy("invite-done")
        ),
        name="invite",
    ),
    path(
        "invite/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="registration/invite_done.html"),
        name="invite-done",
    ),
    # The admin console.
    path("manage/", capacity.index, name="manage"),
    path("manage/teams/", people.teams, name="manage-teams"),
    path("manage/teams/<int:pk>/", people.team, name="manage-team"),
    path("manage/teams/<int:pk>/delete/", people.team_delete, name="manage-team-delete"),
    path(
        "manage/teams/<int:pk>/members/<int:user_id>/remove/",
        people.team_member_remove,
        name="manage-member-remove",
    ),
    path("manage/webhooks/", notices.webhooks, name="manage-webhooks"),
    path("manage/webhooks/<int:pk>/", notices.webhook, name="manage-webhook"),
    path("manage/webhooks/<int:pk>/delete/", notices.webhook_delete, name="manage-webhook-delete"),
    path("manage/users/", people.users, name="manage-users"),
    path("manage/tokens/", account.manage_tokens, name="manage-tokens"),
    path("manage/users/<int:pk>/", people.user, name="manage-user"),
    path("manage/units/", capacity.units, name="manage-units"),
    path("manage/units/<int:pk>/", capacity.unit, name="manage-unit"),
    path("manage/units/<int:pk>/delete/", capacity.unit_delete, name="manage-unit-delete"),
    path("manage/environments/", capacity.environments, name="manage-environments"),
    path("manage/environments/<int:pk>/", capacity.environment, name="manage-environment"),
    path("manage/environments/<int:pk>/slurm/", slurm.slurm_settings, name="manage-slurm"),
    path(
        "manage/environments/<int:pk>/delete/",
        capacity.environment_delete,
        name="manage-environment-delete",
    ),
    path(
        "manage/reservations/<int:pk>/cancel/",
        capacity.reservation_cancel,
        name="manage-reservation-cancel",
    ),
    path("manage/policies/", capacity.policies, name="manage-policies"),
    path("manage/policies/<int:pk>/delete/", capacity.policy_delete, name="manage-policy-delete"),
    path("manage/queues/", capacity.queues, name="manage-queues"),
    path("manage/queues/<int:pk>/", capacity.queue, name="manage-queue"),
    path("manage/queues/<int:pk>/delete/", capacity.queue_delete, name="manage-queue-delete"),
]
