"""Teams, capacity units and scheduling policies: serializers (shapes and types only; the
rules live in quotas.services) and viewsets (parse, call one service or selector, render)."""

from __future__ import annotations

from rest_framework import serializers

from quotaportal.api.common import NamedViewSet
from quotaportal.quotas import services
from quotaportal.quotas.models import (
    CapacityUnit,
    SchedulingPolicy,
    Team,
)


class TeamSerializer(serializers.ModelSerializer):
    members = serializers.SlugRelatedField(many=True, read_only=True, slug_field="username")

    class Meta:
        model = Team
        fields = ["name", "members"]


class CapacityUnitSerializer(serializers.ModelSerializer):
    class Meta:
        model = CapacityUnit
        fields = ["name", "gpus_per_unit", "description"]


class SchedulingPolicySerializer(serializers.ModelSerializer):
    class Meta:
        model = SchedulingPolicy
        fields = ["name", "idle_resource_assignment_strategy"]


class TeamViewSet(NamedViewSet):
    queryset = Team.objects.prefetch_related("members").order_by("name")
    serializer_class = TeamSerializer
    kind_name = "team"

    def create_with_service(self, data):
        return services.create_team(self.request.user, name=data["name"])


class CapacityUnitViewSet(NamedViewSet):
    queryset = CapacityUnit.objects.order_by("name")
    serializer_class = CapacityUnitSerializer
    kind_name = "capacity unit"

    def create_with_service(self, data):
        return services.create_capacity_unit(self.request.user, **data)


class SchedulingPolicyViewSet(NamedViewSet):
    queryset = SchedulingPolicy.objects.order_by("name")
    serializer_class = SchedulingPolicySerializer
    kind_name = "scheduling policy"

    def create_with_service(self, data):
        return services.create_scheduling_policy(self.request.user, name=data["name"])
