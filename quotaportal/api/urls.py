from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from quotaportal.api import (
    agent,
    arrays,
    configuration,
    environments,
    hosts,
    jobs,
    me,
    queues,
    shares,
    tokens,
    usage,
    webhooks,
)

router = DefaultRouter()
router.register("teams", configuration.TeamViewSet, basename="team")
router.register("capacity-units", configuration.CapacityUnitViewSet, basename="capacity-unit")
router.register(
    "service-environments", environments.ServiceEnvironmentViewSet, basename="service-environment"
)
router.register(
    "scheduling-policies", configuration.SchedulingPolicyViewSet, basename="scheduling-policy"
)
router.register("job-queues", queues.JobQueueViewSet, basename="job-queue")
router.register("quota-shares", shares.QuotaShareViewSet, basename="quota-share")
router.register("jobs", jobs.JobViewSet, basename="job")
router.register("job-arrays", arrays.JobArrayViewSet, basename="job-array")
router.register("hosts", hosts.HostViewSet, basename="host")
router.register("agent-tokens", hosts.AgentTokenViewSet, basename="agent-token")
router.register("webhooks", webhooks.WebhookViewSet, basename="webhook")
router.register("tokens", tokens.PersonalTokenViewSet, basename="token")

urlpatterns = [
    path("agent/register/", agent.RegisterView.as_view(), name="agent-register"),
    path("agent/heartbeat/", agent.HeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/report/", agent.ReportView.as_view(), name="agent-report"),
    path("agent/reports/", agent.ReportsView.as_view(), name="agent-reports"),
    path("agent/output/", agent.OutputView.as_view(), name="agent-output"),
    path("usage/", usage.UsageView.as_view(), name="usage-api"),
    path("me/", me.MeView.as_view(), name="me"),
    *router.urls,
]
