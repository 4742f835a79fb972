from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from quotaportal.api import agent, views

router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="team")
router.register("capacity-units", views.CapacityUnitViewSet, basename="capacity-unit")
router.register(
    "service-environments", views.ServiceEnvironmentViewSet, basename="service-environment"
)
router.register("scheduling-policies", views.SchedulingPolicyViewSet, basename="scheduling-policy")
router.register("job-queues", views.JobQueueViewSet, basename="job-queue")
router.register("quota-shares", views.QuotaShareViewSet, basename="quota-share")
router.register("jobs", views.JobViewSet, basename="job")
router.register("hosts", views.HostViewSet, basename="host")
router.register("agent-tokens", views.AgentTokenViewSet, basename="agent-token")

urlpatterns = [
    path("agent/register/", agent.RegisterView.as_view(), name="agent-register"),
    path("agent/heartbeat/", agent.HeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/report/", agent.ReportView.as_view(), name="agent-report"),
    path("agent/reports/", agent.ReportsView.as_view(), name="agent-reports"),
    *router.urls,
]
