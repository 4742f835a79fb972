"""GPU hosts and agent tokens, as admins see them: serializers and viewsets."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api.common import NAME
from quotaportal.api.environments import AgentTokenSerializer
from quotaportal.hosts import services as host_services
from quotaportal.hosts.models import AgentToken, GpuHost


class HostSerializer(serializers.ModelSerializer):
    service_environment = serializers.SlugRelatedField(slug_field="name", read_only=True)
    capacity_unit = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = GpuHost
        fields = [
            "name",
            "service_environment",
            "capacity_unit",
            "slots",
            "gpu_indices",
            "state",
            "last_heartbeat",
        ]


class HostStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=["READY", "DRAINING"])


class AgentTokenViewSet(viewsets.ReadOnlyModelViewSet):
    """Admins: agent tokens (never the secret itself) and their revocation."""

    serializer_class = AgentTokenSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user to check
            return AgentToken.objects.none()
        return host_services.agent_tokens(self.request.user)

    @extend_schema(request=None, responses=AgentTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        """The token stops working now; its hosts go LOST and their jobs fail over."""
        token = host_services.revoke_agent_token(request.user, self.get_object())
        return Response(self.get_serializer(token).data)


class HostViewSet(mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet):
    queryset = GpuHost.objects.select_related("service_environment", "capacity_unit").order_by(
        "name"
    )
    serializer_class = HostSerializer
    lookup_field = "name"
    lookup_value_regex = NAME

    @extend_schema(request=HostStateSerializer, responses=HostSerializer)
    @action(detail=True, methods=["post"], url_path="state")
    def set_state(self, request, name=None):
        """Admins drain a host (no new jobs; running ones finish) or make it READY again."""
        serializer = HostStateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        host = host_services.set_host_state(
            request.user, self.get_object(), serializer.validated_data["state"]
        )
        return Response(self.get_serializer(host).data)

    @extend_schema(request=None, responses=HostSerializer)
    @action(detail=True, methods=["post"])
    def release(self, request, name=None):
        """Admins: free the host's name for another agent token (the host goes LOST)."""
        host = host_services.release_host(request.user, self.get_object())
        return Response(self.get_serializer(host).data)

    def destroy(self, request, *args, **kwargs):
        """Admins delete a LOST host (409 otherwise)."""
        host_services.delete_host(request.user, self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
