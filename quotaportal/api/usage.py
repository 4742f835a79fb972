"""GET /api/v1/usage/: who used what over a period, grouped, as JSON or CSV."""

from __future__ import annotations

import csv
import io

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import renderers, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from quotaportal.usage import reports


class CSVRenderer(renderers.BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        out = io.StringIO()
        writer = csv.writer(out)
        if isinstance(data, dict) and "rows" in data:
            writer.writerows(reports.csv_lines(data))
        else:  # an error: its messages, one per line
            writer.writerow(["error"])
            for field, message in (data or {}).items():
                writer.writerow([f"{field}: {message}"])
        return out.getvalue().encode(self.charset)


class UsageQuery(serializers.Serializer):
    start = serializers.CharField(required=False, max_length=64)
    end = serializers.CharField(required=False, max_length=64)
    group_by = serializers.ChoiceField(choices=sorted(reports.GROUPS), default="team")
    job_queue = serializers.CharField(required=False, max_length=128)
    team = serializers.CharField(required=False, max_length=64)

    def validate(self, attrs):
        try:
            attrs["start"], attrs["end"] = reports.parse_period(
                attrs.get("start"), attrs.get("end"), timezone.now()
            )
        except ValueError as error:
            raise serializers.ValidationError(error.args[0]) from None
        return attrs


class UsageView(APIView):
    renderer_classes = [renderers.JSONRenderer, renderers.BrowsableAPIRenderer, CSVRenderer]

    @extend_schema(
        parameters=[
            UsageQuery,
            OpenApiParameter("format", str, enum=["json", "csv"], description="csv: a file"),
        ],
        responses={200: dict},
        description=(
            "Instance-seconds used over [start, end) (ISO 8601; the last 7 days by default), "
            "split into own (within the share's limit) and borrowed, with work lost to "
            "preemption, capacity lent, jobs, attempts and waits (p50/p90 of submitted → "
            "first start), grouped by team, share, user, unit or queue. Scientists see "
            "their teams' rows; admins all."
        ),
    )
    def get(self, request):
        query = UsageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        scope = reports.scope_for(request.user, params.get("job_queue"), params.get("team"))
        report = reports.usage_report(params["start"], params["end"], params["group_by"], scope)
        response = Response(report)
        if request.accepted_renderer.format == "csv":
            name = f"usage-{params['group_by']}-{params['start']:%Y%m%d}-{params['end']:%Y%m%d}"
            response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
        return response
