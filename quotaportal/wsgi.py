from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "quotaportal.settings")
application = get_wsgi_application()


def load_before_serving() -> None:
    """Do now what a new web worker's first requests would otherwise do while they are timed,
    holding up the requests its other threads serve: import the URLconf (every view,
    serializer and form, ~0.3 s) and the Redis client (~0.2 s), then collect once and
    freeze what is loaded. A full collection walks every object in the process; without the
    freeze, the two that follow start-up took 100-300 ms each, mid-request, and later ones
    walk the whole of Django again. Frozen objects are never collected, so the collect comes
    first."""
    from django.conf import settings
    from django.urls import get_resolver

    from quotaportal.infra import redis_client

    get_resolver().url_patterns  # noqa: B018 - the property imports every view
    if settings.REDIS_URL:
        redis_client.client(settings.REDIS_URL)  # builds the client; connects on first use
    gc.collect()
    gc.freeze()


load_before_serving()
