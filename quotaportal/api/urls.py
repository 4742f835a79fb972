from __future__ import annotations

from rest_framework.routers import DefaultRouter

from quotaportal.api import views

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

urlpatterns = router.urls
