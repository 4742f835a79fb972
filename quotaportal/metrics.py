"""Prometheus metrics at /metrics, read from the database at scrape time.

Every web process answers the same figures (no per-process state to merge), and the counters
come from rows that only grow: dispatch and preemption events, and TickStat's cumulative tick
counts. The metric set follows Kueue's (pending workloads per reason, admitted and evicted
totals, quota and usage per resource, admission-cycle latency) in this project's words.

Only authenticated scrapers are served: `Authorization: Bearer <QP_METRICS_TOKEN>`, or a
client address in QP_METRICS_ALLOWED_IPS. With neither configured every scrape is refused, so
the figures (team names, usage) are never public by accident.
"""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.db.models import Count, Max, Sum
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from quotaportal.awsbatch.models import SyncState
from quotaportal.hosts.models import GpuHost
from quotaportal.quotas import selectors
from quotaportal.quotas.models import (
    TICK_BUCKETS,
    TICK_SKIPPED,
    Event,
    EventKind,
    Job,
    JobQueue,
    JobStatus,
    Reservation,
    ServiceEnvironment,
    TickStat,
)
from quotaportal.tick import bridge
from quotaportal.usage import reports as usage_reports

PREEMPTION_KINDS = {
    EventKind.PREEMPTED_CROSS_SHARE: "cross_share",
    EventKind.PREEMPTED_IN_SHARE: "in_share",
    EventKind.PREEMPTED_CAPACITY: "capacity",
}
QUOTA_FIGURES = ("limit", "used", "borrowed", "lent")


class PortalCollector:
    """Yields every metric family from the database; one instance per scrape."""

    def collect(self):
        now = timezone.now()
        queues = list(JobQueue.objects.select_related("service_environment").order_by("name"))
        yield from self._jobs()
        yield from self._quota(queues)
        yield from self._capacity(now)
        yield from self._ticks(queues)
        yield from self._hosts(now)
        yield from self._aws_sync(now)
        yield self._usage(now)

    def _usage(self, now):
        """The usage reports' figures as counters (usage.reports: hour and day rows, and the
        time since the last roll-up counted live), so Grafana charts the same numbers."""
        usage = CounterMetricFamily(
            "quotaportal_usage_instance_seconds",
            "Instance-seconds used, per quota share and kind: own (within the share's limit), "
            "borrowed (above it) and preempted (work lost, counted when the preemption happened).",
            labels=["job_queue", "quota_share", "team", "kind"],
        )
        for row in usage_reports.since_ever(now)["rows"]:
            labels = [row["job_queue"], row["quota_share"], row["team"]]
            for kind in ("own", "borrowed", "preempted"):
                usage.add_metric([*labels, kind], row[f"{kind}_instance_seconds"])
        return usage

    def _jobs(self):
        pending = GaugeMetricFamily(
            "quotaportal_pending_jobs",
            "RUNNABLE jobs per quota share and pending reason.",
            labels=["job_queue", "quota_share", "reason"],
        )
        for queue, share, reason, n in (
            Job.objects.filter(status=JobStatus.RUNNABLE)
            .values_list("job_queue__name", "share_name", "pending_reason")
            .annotate(n=Count("id"))
            .order_by()
        ):
            pending.add_metric([queue, share, reason or "NOT_PLANNED_YET"], n)
        yield pending
        dispatched = CounterMetricFamily(
            "quotaportal_dispatched_jobs",
            "Jobs the scheduler started (each attempt counts), per quota share.",
            labels=["job_queue", "quota_share"],
        )
        preempted = CounterMetricFamily(
            "quotaportal_preempted_jobs",
            "Jobs preempted, per quota share and kind (cross_share, in_share, capacity).",
            labels=["job_queue", "quota_share", "kind"],
        )
        kinds = [EventKind.DISPATCHED, *PREEMPTION_KINDS]
        for queue, share, kind, n in (
            Event.objects.filter(kind__in=kinds, job_queue__isnull=False)
            .values_list("job_queue__name", "share__name", "kind")
            .annotate(n=Count("id"))
            .order_by()
        ):
            if kind == EventKind.DISPATCHED:
                dispatched.add_metric([queue, share or ""], n)
            else:
                preempted.add_metric([queue, share or "", PREEMPTION_KINDS[kind]], n)
        yield dispatched
        yield preempted

    def _quota(self, queues):
        families = {
            figure: GaugeMetricFamily(
                f"quotaportal_quota_{figure}",
                f"Instances of a capacity unit: the share's {figure}"
                + (" (its idle capacity in use by borrowers)." if figure == "lent" else "."),
                labels=["job_queue", "quota_share", "capacity_unit"],
            )
            for figure in QUOTA_FIGURES
        }
        for queue in queues:
            for share, units in selectors.share_utilization(queue).items():
                for unit, figures in units.items():
                    for figure in QUOTA_FIGURES:
                        families[figure].add_metric([queue.name, share, unit], figures[figure])
        yield from families.values()

    def _capacity(self, now):
        capacity = GaugeMetricFamily(
            "quotaportal_environment_capacity",
            "Instances per capacity unit now, as the planner uses them: max capacity plus active "
            "reservations, no more than the backend provides (LOCAL: the READY hosts' slots).",
            labels=["service_environment", "capacity_unit"],
        )
        reserved = GaugeMetricFamily(
            "quotaportal_environment_reserved_capacity",
            "Instances per capacity unit from reservations active now.",
            labels=["service_environment", "capacity_unit"],
        )
        for env in ServiceEnvironment.objects.order_by("name"):
            for unit, n in sorted(bridge.capacity_now(env, now).items()):
                capacity.add_metric([env.name, unit], n)
        for env, unit, n in (
            Reservation.objects.filter(starts_at__lte=now, ends_at__gt=now)
            .values_list("environment__name", "capacity_unit__name")
            .annotate(n=Sum("instances"))
            .order_by()
        ):
            reserved.add_metric([env, unit], n)
        yield capacity
        yield reserved

    def _ticks(self, queues):
        durations = HistogramMetricFamily(
            "quotaportal_tick_duration_seconds",
            "How long each scheduler tick of a job queue took.",
            labels=["job_queue"],
        )
        skipped = CounterMetricFamily(
            "quotaportal_skipped_ticks",
            "Ticks that found another tick of their environment running and did nothing.",
            labels=["job_queue"],
        )
        last = GaugeMetricFamily(
            "quotaportal_last_tick_timestamp_seconds",
            "When the job queue last ticked (Unix time); alert when it stops moving.",
            labels=["job_queue"],
        )
        stats: dict[int, dict[str, tuple[int, float]]] = {}
        for queue_id, bucket, count, seconds in TickStat.objects.values_list(
            "job_queue_id", "bucket", "count", "seconds"
        ):
            stats.setdefault(queue_id, {})[bucket] = (count, seconds)
        latest = dict(
            JobQueue.objects.annotate(t=Max("scheduler_runs__started_at")).values_list("id", "t")
        )
        for queue in queues:
            rows = stats.get(queue.id, {})
            cumulative, buckets, total = 0, [], 0.0
            for bound in (*TICK_BUCKETS, "+Inf"):
                count, seconds = rows.get(bound, (0, 0.0))
                cumulative += count
                total += seconds
                buckets.append((bound, cumulative))
            durations.add_metric([queue.name], buckets, total)
            skipped.add_metric([queue.name], rows.get(TICK_SKIPPED, (0, 0.0))[0])
            if latest.get(queue.id):
                last.add_metric([queue.name], latest[queue.id].timestamp())
        yield durations
        yield skipped
        yield last

    def _hosts(self, now):
        by_state = GaugeMetricFamily(
            "quotaportal_hosts",
            "GPU hosts per service environment and state (READY, DRAINING, LOST).",
            labels=["service_environment", "state"],
        )
        age = GaugeMetricFamily(
            "quotaportal_host_heartbeat_age_seconds",
            "Seconds since each GPU host's last heartbeat.",
            labels=["service_environment", "host"],
        )
        counts: dict[tuple[str, str], int] = {}
        for env, host, state, beat in GpuHost.objects.values_list(
            "service_environment__name", "name", "state", "last_heartbeat"
        ).order_by("name"):
            counts[env, state] = counts.get((env, state), 0) + 1
            if beat is not None:
                age.add_metric([env, host], max(0.0, (now - beat).total_seconds()))
        for (env, state), n in sorted(counts.items()):
            by_state.add_metric([env, state], n)
        yield by_state
        yield age

    def _aws_sync(self, now):
        lag = GaugeMetricFamily(
            "quotaportal_aws_sync_lag_seconds",
            "Seconds since an AWS_BATCH environment's last successful sync with AWS Batch.",
            labels=["service_environment"],
        )
        failures = GaugeMetricFamily(
            "quotaportal_aws_sync_failures",
            "Failed syncs in a row of an AWS_BATCH environment (0 when healthy).",
            labels=["service_environment"],
        )
        for name, last, failed in SyncState.objects.values_list(
            "environment__name", "last_success_at", "failures"
        ).order_by("environment__name"):
            if last is not None:
                lag.add_metric([name], max(0.0, (now - last).total_seconds()))
            failures.add_metric([name], failed)
        yield lag
        yield failures


def scraper_allowed(request) -> tuple[bool, str]:
    """(allowed, why not) for a scrape, by bearer token or client address."""
    token = settings.QP_METRICS_TOKEN
    allowed_ips = settings.QP_METRICS_ALLOWED_IPS
    if not token and not allowed_ips:
        return False, "metrics are off: set QP_METRICS_TOKEN or QP_METRICS_ALLOWED_IPS"
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # The scheme is case-insensitive (RFC 9110); the token is compared in constant time.
    if token and scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token.encode()):
        return True, ""
    address = request.META.get("REMOTE_ADDR", "")
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        client = None
    if client is not None and any(client in network for network in allowed_ips):
        return True, ""
    if token:
        return False, "send Authorization: Bearer <QP_METRICS_TOKEN>"
    return False, f"address {address} is not in QP_METRICS_ALLOWED_IPS"


def metrics(request):
    allowed, why = scraper_allowed(request)
    if not allowed:
        status = 401 if why.startswith("send") else 403
        answer = HttpResponse(why + "\n", status=status, content_type="text/plain")
        if status == 401:
            answer["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return answer
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
