from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection
from django.db.models import Max
from django.http import JsonResponse
from django.utils import timezone

from quotaportal.failures import RETRY_AFTER_SECONDS
from quotaportal.infra.worker_health import broker_problem
from quotaportal.quotas.models import JobQueue, State


def stale_queues(now=None) -> list[str]:
    """ENABLED queues whose last tick (or creation, if never ticked) is older than
    QP_HEALTH_TICK_AGE: the scheduler (beat, worker or embedded loop) is stuck or gone."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.QP_HEALTH_TICK_AGE)
    queues = JobQueue.objects.filter(state=State.ENABLED).annotate(
        last_tick=Max("scheduler_runs__started_at")
    )
    return [
        f"{q.name} (last tick {q.last_tick.isoformat() if q.last_tick else 'never'})"
        for q in queues
        if (q.last_tick or q.created_at) < cutoff
    ]


def healthz(request):
    """Liveness for load balancers, compose and orchestrators: 200 when the database answers,
    the broker answers and a Celery worker reported recently (with REDIS_URL), and every
    ENABLED queue ticked recently; 503 with every reason otherwise. A few cheap reads, so it
    can be polled every few seconds."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as err:
        return _unhealthy([f"the database does not answer: {type(err).__name__}"])
    reasons = []
    stale = stale_queues()
    if stale:
        reasons.append(
            f"no scheduler tick for over {settings.QP_HEALTH_TICK_AGE} s: "
            f"{', '.join(stale)}; is celery beat (and a worker) running?"
        )
    if problem := broker_problem():
        reasons.append(problem)
    if reasons:
        return _unhealthy(reasons)
    return JsonResponse({"status": "ok", "database": connection.vendor})


def _unhealthy(reasons: list[str]) -> JsonResponse:
    response = JsonResponse(
        {"status": "unhealthy", "database": connection.vendor, "reason": "; ".join(reasons)},
        status=503,
    )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
