"""A user's own access keys for the AWS Batch-compatible endpoint (boto3, the SageMaker SDK)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from quotaportal.awsbatch import keys as key_services
from quotaportal.awsbatch.models import AccessKey
from quotaportal.quotas.errors import ServiceError


def _page(request, **extra):
    keys = request.user.aws_access_keys.order_by("-created_at")
    endpoint = request.build_absolute_uri("/aws/batch")
    return render(request, "web/aws_keys.html", {"keys": keys, "endpoint": endpoint, **extra})


@never_cache  # the page that shows a new secret must never be kept by a cache or the back button
@login_required
def aws_keys(request):
    if request.method != "POST":
        return _page(request)
    try:
        key, secret = key_services.create_access_key(request.user, request.user)
    except ServiceError as err:
        messages.error(request, err.message)
        return redirect("aws-keys")
    return _page(request, new_key=key, secret=secret)


@require_POST
@login_required
def aws_key_revoke(request, pk):
    key = get_object_or_404(AccessKey, pk=pk, user=request.user)
    key_services.revoke_access_key(request.user, key)
    messages.success(request, f"Access key {key.access_key_id} revoked: it no longer signs.")
    return redirect("aws-keys")
