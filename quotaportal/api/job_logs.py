"""A job's whole output through the REST API (`GET /api/v1/jobs/{id}/logs/`): raw bytes from
an offset or a Range header, with the headers a follower reads on by."""

from __future__ import annotations

import json
import re

from django.http import HttpResponse
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.renderers import BaseRenderer

from quotaportal.jobs.output import READ_LIMIT, read_output
from quotaportal.quotas.permissions import can_read_output


class LogQuerySerializer(serializers.Serializer):
    rank = serializers.IntegerField(min_value=0, default=0)
    attempt = serializers.IntegerField(
        min_value=1, required=False, help_text="its number; the latest by default"
    )
    offset = serializers.IntegerField(
        min_value=0, default=0, help_text="the first byte to read (or a Range: bytes=N- header)"
    )
    limit = serializers.IntegerField(min_value=1, max_value=READ_LIMIT, default=READ_LIMIT)


class OutputRenderer(BaseRenderer):
    """The raw bytes of a job's output; an error as JSON text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, bytes) else json.dumps(data).encode()


RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


def _range(request, query: dict) -> tuple[int, int, bool]:
    """(offset, limit, asked by a Range header)."""
    header = request.headers.get("Range", "")
    if not header:
        return query["offset"], query["limit"], False
    match = RANGE.match(header.strip())
    if match is None:
        raise serializers.ValidationError({"Range": "only one range, as bytes=START- or START-END"})
    start, end = int(match[1]), match[2]
    if end and int(end) < start:
        raise serializers.ValidationError({"Range": "the range ends before it starts"})
    limit = min(READ_LIMIT, int(end) - start + 1) if end else query["limit"]
    return start, limit, True


def answer(request, job) -> HttpResponse:
    if not can_read_output(request.user, job):
        raise PermissionDenied("a job's output is for its team, its submitter and admins")
    query = LogQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    offset, limit, ranged = _range(request, query.validated_data)
    read = read_output(
        job,
        attempt=query.validated_data.get("attempt"),
        rank=query.validated_data["rank"],
        offset=offset,
        limit=limit,
    )
    response = HttpResponse(
        read.data,
        content_type="text/plain; charset=utf-8",
        status=206 if ranged else 200,
        headers=read.headers(),
    )
    if ranged:
        total = str(read.size) if read.complete else "*"
        last = max(read.offset, read.next_offset - 1)
        response["Content-Range"] = f"bytes {read.offset}-{last}/{total}"
    return response
