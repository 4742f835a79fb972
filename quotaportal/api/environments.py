"""Service environments, their reservations and agent tokens: serializers and the viewset."""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api.common import (
    CapacityLimitSerializer,
    NamedRef,
    NamedViewSet,
    limits_to_dict,
    limits_to_list,
)
from quotaportal.hosts import services as host_services
from quotaportal.quotas import services
from quotaportal.quotas.errors import NotFound
from quotaportal.quotas.models import (
    Backend,
    CapacityUnit,
    Reservation,
    ServiceEnvironment,
    State,
)
from quotaportal.quotas.services import reservations as reservation_services
from quotaportal.quotas.services.environments import AWS_CONNECTION_FIELDS


class ServiceEnvironmentSerializer(serializers.ModelSerializer):
    capacity_limits = CapacityLimitSerializer(many=True)
    backend = serializers.ChoiceField(choices=Backend.choices, default=Backend.SIMULATED)
    state = serializers.ChoiceField(choices=State.choices, default=State.ENABLED)

    region = serializers.CharField(max_length=32, required=False, allow_blank=True)
    endpoint_url = serializers.CharField(
        max_length=256,
        required=False,
        allow_blank=True,
        help_text="AWS_BATCH: where boto3 sends its calls; empty for AWS's own endpoint.",
    )
    aws_profile = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        help_text=(
            "AWS_BATCH: a profile of the AWS config files; empty for boto3's default "
            "credential chain (environment, instance role). No secret is ever stored."
        ),
    )
    aws_sync = serializers.SerializerMethodField(
        help_text=(
            "AWS_BATCH: last successful sync, last error, failures in a row, the next try while "
            "backing off, calls in the last tick (else null)."
        )
    )

    class Meta:
        model = ServiceEnvironment
        fields = [
            "name",
            "backend",
            "state",
            "region",
            "endpoint_url",
            "aws_profile",
            "capacity_limits",
            "aws_sync",
        ]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["capacity_limits"] = limits_to_list(instance.capacity_limits)
        return data

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_aws_sync(self, env):
        state = getattr(env, "aws_sync", None) if env.backend == Backend.AWS_BATCH else None
        if state is None:
            return None
        stamp = serializers.DateTimeField().to_representation
        return {
            "last_success_at": stamp(state.last_success_at) if state.last_success_at else None,
            "last_error": state.last_error or None,
            "last_error_at": stamp(state.last_error_at) if state.last_error_at else None,
            "failures_in_a_row": state.failures,
            # While backing off after a failure, when the next sync may try again.
            "next_try_at": stamp(state.backoff_until) if state.backoff_until else None,
            "calls_last_tick": state.last_calls,
        }


class ReservationSerializer(serializers.ModelSerializer):
    capacity_unit = NamedRef(queryset=CapacityUnit.objects.all())
    instances = serializers.IntegerField(min_value=1, max_value=1_000_000)
    state = serializers.SerializerMethodField()

    class Meta:
        model = Reservation
        fields = [
            "name",
            "capacity_unit",
            "instances",
            "starts_at",
            "ends_at",
            "state",
            "fitted_at",
        ]
        read_only_fields = ["fitted_at"]
        validators = []  # name uniqueness is the service's rule, with its own message

    def get_state(self, reservation) -> str:
        now = timezone.now()
        if reservation.ends_at <= now:
            return "OVER"
        return "ACTIVE" if reservation.starts_at <= now else "UPCOMING"


class AgentTokenRequestSerializer(serializers.Serializer):
    host_name = serializers.CharField(max_length=128, required=False, allow_blank=True)


class AgentTokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    service_environment = serializers.CharField(source="environment.name")
    prefix = serializers.CharField(help_text="the token's first characters, to tell it apart")
    host_name = serializers.CharField(help_text="the host it speaks for; empty until it binds")
    hosts = serializers.ListField(
        child=serializers.CharField(), source="host_names", read_only=True
    )
    created_at = serializers.DateTimeField()
    revoked = serializers.BooleanField()
    revoked_at = serializers.DateTimeField(allow_null=True)


class ServiceEnvironmentViewSet(mixins.UpdateModelMixin, NamedViewSet):
    queryset = (
        ServiceEnvironment.objects.prefetch_related("capacity_limits__capacity_unit")
        .select_related("aws_sync")
        .order_by("name")
    )
    serializer_class = ServiceEnvironmentSerializer
    kind_name = "service environment"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def create_with_service(self, data):
        return services.create_service_environment(
            self.request.user,
            name=data["name"],
            backend=data["backend"],
            state=data["state"],
            region=data.get("region", ""),
            endpoint_url=data.get("endpoint_url", ""),
            aws_profile=data.get("aws_profile", ""),
            capacity_limits=limits_to_dict(data["capacity_limits"]),
        )

    def update(self, request, *args, **kwargs):
        env = self.get_object()
        serializer = self.get_serializer(env, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        connection = AWS_CONNECTION_FIELDS
        if set(data) - {"capacity_limits", "state", *connection}:
            raise serializers.ValidationError(
                {
                    "detail": "only capacity_limits, state, region, endpoint_url and "
                    "aws_profile can be changed"
                }
            )
        limits = limits_to_dict(data["capacity_limits"]) if "capacity_limits" in data else None
        services.update_service_environment(
            request.user,
            env,
            capacity_limits=limits,
            state=data.get("state"),
            **{key: data[key] for key in connection if key in data},
        )
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(request=ReservationSerializer, responses=ReservationSerializer)
    @action(detail=True, methods=["get", "post"], url_path="reservations")
    def reservations(self, request, name=None):
        """Reserved capacity for a time window (training plans). GET lists every reservation of
        the environment; POST (admins) adds one: the scheduler sees the capacity at its start,
        and at its end preempts what no longer fits (borrowed capacity first)."""
        env = self.get_object()
        if request.method == "GET":
            rows = env.reservations.select_related("capacity_unit").order_by("starts_at")
            return Response(ReservationSerializer(rows, many=True).data)
        serializer = ReservationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        created = reservation_services.create_reservation(
            request.user, env, **serializer.validated_data
        )
        return Response(ReservationSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: dict})
    @action(
        detail=True,
        methods=["delete"],
        url_path=r"reservations/(?P<reservation>[^/]+)",
        url_name="reservation",
    )
    def cancel_reservation(self, request, name=None, reservation=None):
        """Admins: cancel a reservation. One not started yet is deleted; an active one ends now
        (what no longer fits is preempted at the next tick)."""
        env = self.get_object()
        found = env.reservations.filter(name=reservation).first()
        if found is None:
            raise NotFound(f"environment {env.name} has no reservation named {reservation}")
        outcome = reservation_services.cancel_reservation(request.user, found)
        return Response({"name": reservation, "outcome": outcome})

    @extend_schema(request=AgentTokenRequestSerializer, responses={201: dict})
    @action(detail=True, methods=["post"], url_path="agent-token")
    def agent_token(self, request, name=None):
        """Admins: a new agent token for one host of this LOCAL environment (shown once).

        With `host_name` it serves only that host; without, it binds to the first host name
        that registers with it.
        """
        serializer = AgentTokenRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token = host_services.create_agent_token(
            request.user, self.get_object(), serializer.validated_data.get("host_name", "")
        )
        return Response({"token": token}, status=status.HTTP_201_CREATED)
