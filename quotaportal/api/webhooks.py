"""Webhooks (admins only) and each one's delivery log."""

from __future__ import annotations

from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from quotaportal.api.common import NamedRef
from quotaportal.notifications import services
from quotaportal.notifications.models import Delivery, DetailType, Webhook, WebhookFormat
from quotaportal.notifications.services import MIN_SECRET
from quotaportal.quotas.models import JobQueue, Team
from quotaportal.quotas.permissions import is_platform_admin

RECENT_DELIVERIES = 100


class IsPlatformAdmin(BasePermission):
    message = "only admins can see and change webhooks"

    def has_permission(self, request, view) -> bool:
        return is_platform_admin(request.user)


class WebhookSerializer(serializers.ModelSerializer):
    secret = serializers.CharField(
        write_only=True,
        min_length=MIN_SECRET,
        max_length=256,
        help_text="Signs each body: X-Quotaportal-Signature: sha256=<hex HMAC-SHA256>. "
        "Never returned.",
    )
    format = serializers.ChoiceField(
        choices=WebhookFormat.choices, default=WebhookFormat.EVENTBRIDGE
    )
    detail_types = serializers.ListField(
        child=serializers.ChoiceField(choices=DetailType.choices),
        required=False,
        help_text="Event types sent (empty: all).",
    )
    job_queues = NamedRef(many=True, required=False, queryset=JobQueue.objects.all())
    teams = NamedRef(many=True, required=False, queryset=Team.objects.all())

    class Meta:
        model = Webhook
        fields = [
            "id",
            "name",
            "url",
            "secret",
            "format",
            "detail_types",
            "job_queues",
            "teams",
            "enabled",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]
        validators = []  # the service checks names, with its own messages

    def service_fields(self) -> dict:
        data = dict(self.validated_data)
        for many in ("job_queues", "teams"):
            if many in data:
                data[many] = [row.name for row in data[many]]
        return data


class DeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.IntegerField()
    job_id = serializers.UUIDField(source="event.job_id", allow_null=True)

    class Meta:
        model = Delivery
        fields = [
            "id",
            "event_id",
            "job_id",
            "detail_type",
            "status",
            "tries",
            "created_at",
            "last_tried_at",
            "next_try_at",
            "delivered_at",
            "response_status",
            "error",
            "body",
        ]


class WebhookViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Where job events are POSTed. Admins only: URLs and filters say much of the setup."""

    serializer_class = WebhookSerializer
    permission_classes = [IsPlatformAdmin]
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    queryset = Webhook.objects.prefetch_related("job_queues", "teams").order_by("name")

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        webhook = services.create_webhook(request.user, **serializer.service_fields())
        return Response(self.get_serializer(webhook).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        webhook = self.get_object()
        serializer = self.get_serializer(webhook, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        services.update_webhook(request.user, webhook, **serializer.service_fields())
        return Response(self.get_serializer(self.get_object()).data)

    def destroy(self, request, *args, **kwargs):
        services.delete_webhook(request.user, self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @action(detail=True, methods=["get"], serializer_class=DeliverySerializer)
    def deliveries(self, request, pk=None):
        """The webhook's latest deliveries, newest first: status, tries, the answer, the body."""
        webhook = self.get_object()
        rows = webhook.deliveries.select_related("event")[:RECENT_DELIVERIES]
        return Response(DeliverySerializer(rows, many=True).data)
