"""Quota shares, and answers to drift from AWS: serializers and the viewset."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from quotaportal.api.common import (
    CapacityLimitSerializer,
    NamedRef,
    StrictFloatField,
    limits_to_dict,
    limits_to_list,
)
from quotaportal.awsbatch.sync import drift as aws_drift
from quotaportal.quotas import services, standings
from quotaportal.quotas.errors import NotFound
from quotaportal.quotas.models import (
    JobQueue,
    QuotaShare,
    State,
    Strategy,
    Team,
)
from scheduler.validation import MAX_BORROW_LIMIT


class QuotaShareSerializer(serializers.ModelSerializer):
    job_queue = NamedRef(queryset=JobQueue.objects.all())
    team = NamedRef(queryset=Team.objects.all())
    capacity_limits = CapacityLimitSerializer(many=True)
    sharing_strategy = serializers.ChoiceField(choices=Strategy.choices)
    borrow_limit = serializers.IntegerField(
        min_value=-1, max_value=MAX_BORROW_LIMIT, required=False, allow_null=True
    )
    state = serializers.ChoiceField(choices=State.choices, default=State.ENABLED)
    fair_share_weight = StrictFloatField(
        required=False,
        help_text="under the queue's fair-share policy, past use counts divided by this "
        "(above 0; default 1)",
    )
    fair_share_standing = serializers.SerializerMethodField(
        help_text="decayed past use per unit of weight, in instance-hours, as the planner "
        "orders borrowers by it (lowest borrows first); null when the queue has no policy"
    )

    class Meta:
        model = QuotaShare
        fields = [
            "id",
            "job_queue",
            "name",
            "team",
            "capacity_limits",
            "sharing_strategy",
            "borrow_limit",
            "in_share_preemption",
            "state",
            "fair_share_weight",
            "fair_share_standing",
        ]
        read_only_fields = ["id"]
        validators = []  # uniqueness is checked by the service, with a message naming the queue

    def get_fair_share_standing(self, share) -> float | None:
        found = self._standings(share.job_queue)
        return None if found is None else round(found.get(share.name, 0.0), 3)

    def _standings(self, queue):
        """Each queue's standings read once for a whole list."""
        cache = self.context.setdefault("fair_share_standings", {})
        if queue.pk not in cache:
            cache[queue.pk] = standings.share_standings(queue)
        return cache[queue.pk]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["capacity_limits"] = limits_to_list(instance.capacity_limits)
        return data


class QuotaShareUpdateSerializer(QuotaShareSerializer):
    class Meta(QuotaShareSerializer.Meta):
        read_only_fields = ["id", "job_queue", "name"]


class DriftDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(
        choices=["keep", "adopt"],
        help_text="keep: the next sync pushes the portal's values to AWS; adopt: the share "
        "takes AWS's values.",
    )


class DriftSerializer(serializers.Serializer):
    detected_at = serializers.DateTimeField()
    aws = serializers.DictField(help_text="AWS's configuration of the share")
    differs = serializers.ListField(
        child=serializers.DictField(), help_text="[{field, portal, aws}] for each difference"
    )


class QuotaShareViewSet(
    mixins.UpdateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = QuotaShareSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self):
        shares = (
            QuotaShare.objects.select_related("job_queue", "team")
            .prefetch_related("capacity_limits__capacity_unit")
            .order_by("job_queue__name", "name")
        )
        if queue := self.request.query_params.get("job_queue"):
            shares = shares.filter(job_queue__name=queue)
        return shares

    def get_serializer_class(self):
        return (
            QuotaShareUpdateSerializer if self.action == "partial_update" else QuotaShareSerializer
        )

    @extend_schema(
        parameters=[OpenApiParameter("job_queue", str, description="only this queue's shares")]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data["capacity_limits"] = limits_to_dict(data["capacity_limits"])
        share = services.create_share(request.user, **data)
        return Response(self.get_serializer(share).data, status=status.HTTP_201_CREATED)

    def update(self, request, *args, **kwargs):
        share = self.get_object()
        serializer = self.get_serializer(share, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        if "capacity_limits" in changes:
            changes["capacity_limits"] = limits_to_dict(changes["capacity_limits"])
        services.update_share(request.user, share, **changes)
        return Response(self.get_serializer(self.get_object()).data)

    def destroy(self, request, *args, **kwargs):
        services.delete_share(request.user, self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(methods=["GET"], responses=DriftSerializer)
    @extend_schema(methods=["POST"], request=DriftDecisionSerializer, responses=None)
    @action(detail=True, methods=["get", "post"], url_path="aws-drift")
    def aws_drift(self, request, pk=None):
        """AWS_BATCH queues: a share changed in the AWS console is held as drift. GET shows it
        (404 when there is none); POST (admins) keeps the portal's values or adopts AWS's."""
        share = self.get_object()
        if request.method == "POST":
            decision = DriftDecisionSerializer(data=request.data)
            decision.is_valid(raise_exception=True)
            aws_drift.resolve_drift(request.user, share, decision.validated_data["decision"])
            return Response(status=status.HTTP_204_NO_CONTENT)
        row = aws_drift.drift_of(share)
        if row is None:
            raise NotFound(f"quota share {share.name} has no unresolved drift")
        differs = [
            {"field": field, "portal": portal, "aws": aws}
            for field, portal, aws in aws_drift.drift_rows(share, row)
        ]
        return Response(
            DriftSerializer({"detected_at": row.drift_at, "aws": row.aws, "differs": differs}).data
        )
