"""The AWS Batch-compatible endpoint: SigV4 in, one operation on the services, AWS's JSON out.

Routes: `POST /aws/batch/v1/<operation>` for every operation, and `/aws/batch/v1/tags/<ARN>`
(GET list, POST tag, DELETE untag) with the ARN percent-encoded as one path segment.
"""

from __future__ import annotations

import logging
import uuid
from urllib.parse import parse_qsl, quote

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from quotaportal.awsbatch import keys
from quotaportal.awsbatch.endpoint import sigv4
from quotaportal.awsbatch.endpoint.operations import OPERATIONS
from quotaportal.awsbatch.endpoint.operations.tags import BY_METHOD
from quotaportal.awsbatch.endpoint.wire import AwsError, from_service_error
from quotaportal.failures import outage_of, too_large
from quotaportal.infra.bodies import loads, unstorable_text
from quotaportal.quotas.errors import ServiceError

log = logging.getLogger(__name__)
SERVICE = "batch"


@csrf_exempt  # requests are signed with the caller's secret, not a browser session
def operation_view(request: HttpRequest, name: str):
    def run(actor):
        if request.method != "POST":
            raise AwsError(f"{name} takes POST", "UnknownOperationException", 405)
        handler = OPERATIONS.get(name.lower())
        if handler is None:
            raise AwsError(f"unknown operation {name}", "UnknownOperationException", 404)
        return handler(actor, _body(request))

    return _answer(request, request.path, run)


@csrf_exempt
def tags_view(request: HttpRequest, resource_arn: str):
    # The client sent the ARN as one percent-encoded segment, which the server decoded; the
    # signature covers the path as sent.
    sent_path = request.path[: -len(resource_arn)] + quote(resource_arn, safe="-_.~")

    def run(actor):
        handler = BY_METHOD.get(request.method)
        if handler is None:
            raise AwsError("tags take GET, POST or DELETE", "UnknownOperationException", 405)
        body = _body(request) if request.method == "POST" else {}
        keys = [v for k, v in parse_qsl(request.META.get("QUERY_STRING", "")) if k == "tagKeys"]
        return handler(actor, resource_arn, body, keys)

    return _answer(request, sent_path, run)


def _answer(request: HttpRequest, sent_path: str, run):
    request_id = str(uuid.uuid4())
    try:
        actor = _authenticate(request, sent_path)
        with transaction.atomic():
            answer = run(actor)
    except sigv4.SignatureError as err:
        return _error(request_id, AwsError(str(err), err.code, 403))
    except AwsError as err:
        return _error(request_id, err)
    except ServiceError as err:
        return _error(request_id, from_service_error(err))
    except RequestDataTooBig:  # sent in chunks, so the middleware saw no length
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return _error(request_id, AwsError(too_large(limit), status=413))
    except Exception as exc:
        if outage := outage_of(exc):
            return _error(request_id, AwsError(outage, "ServerException", 503))
        log.exception("AWS endpoint request %s failed", request_id)
        return _error(
            request_id,
            AwsError(f"internal error; quote request {request_id}", "ServerException", 500),
        )
    response = JsonResponse(answer)
    response["x-amzn-RequestId"] = request_id
    return response


def _authenticate(request: HttpRequest, sent_path: str):
    headers = {name.lower(): value for name, value in request.headers.items()}
    credential = sigv4.parse_authorization(
        headers.get("authorization"), headers.get("x-amz-date"), SERVICE
    )
    sigv4.check_clock(credential, timezone.now())
    key = keys.active_key(credential.access_key_id)
    if key is None:
        raise sigv4.SignatureError(
            "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    raw = request.META.get("RAW_URI") or request.META.get("REQUEST_URI")
    path = raw.split("?", 1)[0] if raw else sent_path
    canonical = sigv4.canonical_request(
        request.method,
        path,
        request.META.get("QUERY_STRING", ""),
        headers,
        credential,
        request.body,
    )
    sigv4.check_signature(key.secret_access_key, credential, canonical)
    return key.user


def _body(request: HttpRequest) -> dict:
    if not request.body:
        return {}
    try:
        body = loads(request.body)
    except ValueError as err:
        raise AwsError(f"the request body is not valid JSON: {err}") from None
    if not isinstance(body, dict):
        raise AwsError("the request body must be a JSON object")
    if problem := unstorable_text(body):
        raise AwsError(f"{problem}; remove it and send the request again")
    return body


def _error(request_id: str, err: AwsError) -> JsonResponse:
    response = JsonResponse({"__type": err.code, "message": err.message}, status=err.status)
    response["x-amzn-ErrorType"] = err.code
    response["x-amzn-RequestId"] = request_id
    return response
