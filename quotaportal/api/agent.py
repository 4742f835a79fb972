"""The agent protocol: register, heartbeat (answered with what should run), report.

Agents authenticate with `Authorization: Agent <token>`; a token is one agent identity: it
belongs to one LOCAL service environment and speaks for one host name
(`manage.py agent_tokens create ENV [--host NAME]`, the hosts page or the REST endpoint).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from quotaportal.api.parsers import BytesParser
from quotaportal.hosts import services
from quotaportal.hosts.models import AgentToken
from quotaportal.jobs.output import OutputGap

MAX_REPORTS = 256
MAX_REPORT_AGE = 7 * 86_400.0  # an agent caps what it sends at this (reporter.MAX_AGE)


class AgentTokenAuthentication(BaseAuthentication):
    keyword = b"agent"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise AuthenticationFailed("use 'Authorization: Agent <token>'")
        token = services.token_for(parts[1].decode(errors="replace"))
        if token is None:
            raise AuthenticationFailed("invalid or revoked agent token")
        return AnonymousUser(), token

    def authenticate_header(self, request):
        return "Agent"


class IsAgent(BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.auth, AgentToken)


class RegisterSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    capacity_unit = serializers.CharField(max_length=64)
    gpus = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=1023),
        max_length=services.MAX_HOST_GPUS,
        error_messages={"max_length": "a host has at most {max_length} GPUs"},
    )
    address = serializers.CharField(max_length=255, required=False, allow_blank=True)


class HeartbeatSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    running = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        max_length=4096,
        help_text="placements the agent runs now, still has reports to send about, or may "
        "yet start (placed here, waiting for GPUs); the server closes the others of ended "
        "attempts",
    )
    heard_up_to = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="the newest placement (an answer's `horizon`) the agent had heard of when it "
        "sent this; the server closes only placements up to it",
    )
    wait = serializers.FloatField(
        required=False,
        default=0.0,
        min_value=0.0,
        max_value=60.0,
        help_text="long-poll: answer once what should run differs from `known`, or after this",
    )
    known = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text="version of the last answer"
    )


class ReportSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    placement = serializers.IntegerField(min_value=1)
    event = serializers.ChoiceField(choices=["started", "output", "exited"])
    exit_code = serializers.IntegerField(
        required=False, allow_null=True, min_value=-1024, max_value=1024
    )
    output_tail = serializers.CharField(
        required=False, allow_blank=True, max_length=20_000, trim_whitespace=False
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    output_ends_at = serializers.IntegerField(
        required=False,
        min_value=0,
        help_text="an exit's output is all sent and ends at this byte: marks it final",
    )
    age = serializers.FloatField(
        required=False,
        min_value=0.0,
        max_value=MAX_REPORT_AGE,
        help_text="seconds from the event to the sending of this report, by the agent's clock; "
        "the server dates the event at the report's arrival less this",
    )


class ReportItemSerializer(ReportSerializer):
    name = None  # the batch names the host once


class ReportsSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    reports = ReportItemSerializer(many=True, allow_empty=False, max_length=MAX_REPORTS)


class AgentView(APIView):
    authentication_classes = [AgentTokenAuthentication]
    permission_classes = [IsAgent]
    serializer_class = HeartbeatSerializer

    def parsed(self, request) -> dict:
        serializer = self.serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class RegisterView(AgentView):
    serializer_class = RegisterSerializer

    def post(self, request):
        host = services.register_host(request.auth, **self.parsed(request))
        return Response(
            {
                "name": host.name,
                "slots": host.slots,
                "state": host.state,
                "capacity_unit": host.capacity_unit.name,
                "lease_seconds": settings.QP_HOST_TIMEOUT,
            }
        )


class HeartbeatView(AgentView):
    serializer_class = HeartbeatSerializer

    def post(self, request):
        data = self.parsed(request)
        return Response(
            services.heartbeat(
                request.auth,
                data["name"],
                data.get("running"),
                wait=data["wait"],
                known=data.get("known"),
                heard_up_to=data.get("heard_up_to"),
            )
        )


class ArrivalStamped:
    """A report's event is dated by its arrival less its age: the arrival is when the request
    reached this view, before it was authenticated and parsed (the server's time, under load
    a few milliseconds, which is no part of the job's)."""

    def dispatch(self, request, *args, **kwargs):
        request.arrived_at = timezone.now()
        return super().dispatch(request, *args, **kwargs)


class ReportView(ArrivalStamped, AgentView):
    serializer_class = ReportSerializer

    def post(self, request):
        data = self.parsed(request)
        services.report(request.auth, data.pop("name"), received=request.arrived_at, **data)
        return Response({"ok": True})


class ReportsView(ArrivalStamped, AgentView):
    """Several reports in one request, applied in order (each on its own): what an agent
    with many GPUs sends as its jobs start and end, instead of one request each. When they
    freed capacity, the answer also carries what should now run on the host, as a heartbeat
    answer does (`placements`, `version`, `horizon`, `lease_seconds`)."""

    serializer_class = ReportsSerializer

    def post(self, request):
        data = self.parsed(request)
        batch = services.report_many(
            request.auth, data["name"], data["reports"], received=request.arrived_at
        )
        # A stale report is refused alone; the others still count.
        results = [{"ok": True} if e is None else {"ok": False, "detail": e} for e in batch.errors]
        return Response({"results": results, **(batch.work or {})})


class OutputQuerySerializer(serializers.Serializer):
    name = serializers.CharField(max_length=128)
    placement = serializers.IntegerField(min_value=1)
    offset = serializers.IntegerField(min_value=0, help_text="of the body's first byte")
    final = serializers.BooleanField(
        default=False, help_text="the rank ended and nothing follows this chunk"
    )


MAX_OUTPUT_CHUNK = 1024 * 1024


class OutputView(AgentView):
    """A chunk of a rank's whole output: the body is its raw bytes (at most 1 MiB), the query
    says where it starts. The answer's `next_offset` is where the next chunk starts; a chunk
    past what is stored gets 409 with the offset to send from; `full` says to send no more
    (the rank's output reached QP_OUTPUT_MAX_BYTES)."""

    parser_classes = [BytesParser]
    serializer_class = OutputQuerySerializer

    @extend_schema(
        request={"application/octet-stream": {"type": "string", "format": "binary"}},
        parameters=[OutputQuerySerializer],
    )
    def post(self, request):
        query = OutputQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = request.data if isinstance(request.data, bytes) else b""
        if len(data) > MAX_OUTPUT_CHUNK:
            raise serializers.ValidationError({"body": f"at most {MAX_OUTPUT_CHUNK} bytes"})
        args = query.validated_data
        try:
            stored = services.ship_output(
                request.auth, args["name"], args["placement"], args["offset"], data, args["final"]
            )
        except OutputGap as gap:
            return Response({"detail": gap.message, "next_offset": gap.expected}, status=409)
        return Response({"next_offset": stored.next_offset, "full": stored.full})


class AgentTokenScheme(OpenApiAuthenticationExtension):
    """Documents the agent's `Authorization: Agent <token>` header in the OpenAPI schema."""

    target_class = AgentTokenAuthentication
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Agent <token>`, a token of a LOCAL service environment",
        }
