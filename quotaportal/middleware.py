"""Request hygiene shared by every interface."""

from __future__ import annotations

from django.http import JsonResponse


class RejectNulCharactersMiddleware:
    """Answer 400 to a NUL character in the path or query string.

    PostgreSQL text cannot hold NUL, so such a value used as a filter or a lookup would fail
    deep in a query with a server error; the client's mistake deserves a clear 400.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path or any(
            "\x00" in v for vs in request.GET.lists() for v in [vs[0], *vs[1]]
        ):
            return JsonResponse({"detail": "the URL may not contain NUL characters"}, status=400)
        return self.get_response(request)
