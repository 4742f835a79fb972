"""quotaportal settings, read from the environment.

With no environment at all it runs on an embedded SQLite database and needs no Redis (the
quick start). Production sets DATABASE_URL (PostgreSQL) and REDIS_URL.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{name} must be true or false, got {value!r}")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    try:
        return default if value is None else int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None


DEBUG = envbool("QP_DEBUG", True)
# The embedded default is a local demo; any real deployment must set its own key.
SECRET_KEY = os.environ.get("QP_SECRET_KEY") or ("insecure-local-demo-key" if DEBUG else None)
if not SECRET_KEY:
    raise RuntimeError("QP_SECRET_KEY must be set when QP_DEBUG is false")
ALLOWED_HOSTS = os.environ.get("QP_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "quotaportal.quotas",
    "quotaportal.notifications",
    "quotaportal.usage",
    "quotaportal.identity",
    "quotaportal.hosts",
    "quotaportal.slurm",
    "quotaportal.simulated",
    "quotaportal.awsbatch",
    "quotaportal.api",
    "quotaportal.web",
    "quotaportal.benchmarks",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Oversize bodies get a 413 and outages a 503, each in its interface's format.
    "quotaportal.failures.RequestLimitsMiddleware",
    "quotaportal.middleware.RejectNulCharactersMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into a 429 answer.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes): after AXES_FAILURE_LIMIT wrong passwords for one username
# from one address, that pair is refused for the cool-off period; a success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    # Single sign-on (identity.oidc); inert until QP_OIDC_ISSUER and a client id are set.
    "quotaportal.identity.oidc.ProviderBackend",
]
# Single sign-on with an OpenID Connect provider (docs/operator/sign-in.md). The issuer's
# /.well-known/openid-configuration names the endpoints; the rules turn group claims into
# teams (a pattern whose `team` group names the team) and the admin role (one group).
QP_OIDC_ISSUER = os.environ.get("QP_OIDC_ISSUER", "")
QP_OIDC_CLIENT_ID = os.environ.get("QP_OIDC_CLIENT_ID", "")
QP_OIDC_CLIENT_SECRET = os.environ.get("QP_OIDC_CLIENT_SECRET", "")
QP_OIDC_NAME = os.environ.get("QP_OIDC_NAME", "single sign-on")  # "Sign in with …"
QP_OIDC_SCOPES = os.environ.get("QP_OIDC_SCOPES", "openid email profile")
QP_OIDC_SIGN_ALGO = os.environ.get("QP_OIDC_SIGN_ALGO", "RS256")
QP_OIDC_USERNAME_CLAIM = os.environ.get("QP_OIDC_USERNAME_CLAIM", "preferred_username")
QP_OIDC_GROUPS_CLAIM = os.environ.get("QP_OIDC_GROUPS_CLAIM", "groups")
QP_OIDC_TEAM_PATTERN = os.environ.get("QP_OIDC_TEAM_PATTERN", r"team-(?P<team>[\w-]+)")
QP_OIDC_ADMIN_GROUP = os.environ.get("QP_OIDC_ADMIN_GROUP", "")
# Passwords of local accounts (a break-glass admin); false leaves single sign-on alone.
QP_LOCAL_LOGIN = envbool("QP_LOCAL_LOGIN", True)
if not QP_LOCAL_LOGIN:
    AUTHENTICATION_BACKENDS.remove("django.contrib.auth.backends.ModelBackend")
try:
    re.compile(QP_OIDC_TEAM_PATTERN)
except re.error as err:
    raise ImproperlyConfigured(f"QP_OIDC_TEAM_PATTERN is not a regular expression: {err}") from None

if not DEBUG:
    # Under gunicorn, WhiteNoise serves the collected static files (no nginx needed);
    # in development Django's staticfiles app serves them.
    MIDDLEWARE.insert(1, "whitenoise.middleware.WhiteNoiseMiddleware")

ROOT_URLCONF = "quotaportal.urls"
WSGI_APPLICATION = "quotaportal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # Numbers for people (duration, instance_hours, ratio) in every template.
            "builtins": ["quotaportal.web.templatetags.web_extras"],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The embedded default serves pages, agents and the scheduler loop at once: write-ahead
    # logging and immediate transactions let them take turns instead of failing "locked".
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif envbool("QP_DB_PREPARED_STATEMENTS", True):
    # PostgreSQL plans a statement the connection prepared (bound by the server) once, not on
    # every run: the hot paths (a batch of reports and its tick, a submit) repeat a few dozen
    # statements, and planning them cost as much as running them. Off for a pooler that cannot
    # keep prepared statements (PgBouncer in transaction mode before 1.21).
    DATABASES["default"]["OPTIONS"] = {"server_side_binding": True, "prepare_threshold": 2}
REDIS_URL = os.environ.get("REDIS_URL", "")
# Every key and channel the portal writes in Redis starts with this: deployments (or test
# runs) sharing a Redis database keep apart by their prefixes.
QP_REDIS_PREFIX = os.environ.get("QP_REDIS_PREFIX", "quotaportal")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
STATIC_ROOT = BASE_DIR / "var" / "static"

AXES_FAILURE_LIMIT = envint("QP_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = envint("QP_LOGIN_COOLOFF_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"

# The submit form's suggested command (`manage.py demo` sets a watchable demo job).
QP_EXAMPLE_COMMAND = os.environ.get("QP_EXAMPLE_COMMAND", "")

# Scheduler loop and host health (docs/operators/settings.md).
QP_TICK_SECONDS = envint("QP_TICK_SECONDS", 2)
# The AWS-compatible endpoint names resources with ARNs of this region and account.
QP_AWS_REGION = os.environ.get("QP_AWS_REGION", "us-east-1")
QP_AWS_ACCOUNT_ID = os.environ.get("QP_AWS_ACCOUNT_ID", "000000000000")
# AWS_BATCH environments: at most this many AWS API calls per queue tick (the rest waits for
# the next tick), and how often the mirrored configuration is compared for drift.
QP_AWS_MAX_CALLS_PER_TICK = envint("QP_AWS_MAX_CALLS_PER_TICK", 60)
QP_AWS_CONFIG_SECONDS = envint("QP_AWS_CONFIG_SECONDS", 30)
QP_AWS_SYNC_SECONDS = envint("QP_AWS_SYNC_SECONDS", 10)  # a sync starts no call after this
# SLURM: a Slurm command (sbatch, scancel, a look) unanswered this long means Slurm is unreachable.
QP_SLURM_COMMAND_SECONDS = envint("QP_SLURM_COMMAND_SECONDS", 10)
# A GPU host silent this long is LOST (its attempts fail "Host lost"); agents' leases last as long.
QP_HOST_TIMEOUT = envint("QP_HOST_TIMEOUT", 30)
# Heartbeats that may wait (long-poll) at once per web process: a quarter of its threads, so
# agents never hold the threads that serve people. Others are answered at once.
QP_LONG_POLL_SLOTS = envint("QP_LONG_POLL_SLOTS", max(1, envint("QP_WEB_THREADS", 32) // 4))
# Enqueue a tick right after a submit, priority change, termination or job end.
QP_IMMEDIATE_TICKS = envbool("QP_IMMEDIATE_TICKS", True)
# A tick plans a queue nothing changed in at least this often (safety net); a STRICT queue's
# tick reads the first QP_TICK_HEADS jobs of each share's line (more where the plan needs
# them) once QP_HEADS_FROM_WAITING jobs, or QP_HEADS_FROM_WAITING_PER_SHARE per share if
# fewer, waited at its last full read (a shorter queue is read whole: bridge.heads_pay_off).
# Every QP_FULL_PLAN_SECONDS (0: every tick) every job is read and planned outside the tick
# lock (beat's "plan-queues-fully"), by a tick only when that has not come for twice as long.
QP_FULL_REPLAN_SECONDS = envint("QP_FULL_REPLAN_SECONDS", 30)
QP_TICK_HEADS = envint("QP_TICK_HEADS", 8)
if QP_TICK_HEADS < 1:
    raise ValueError(f"QP_TICK_HEADS must be at least 1, got {QP_TICK_HEADS}")
QP_HEADS_FROM_WAITING = envint("QP_HEADS_FROM_WAITING", 20_000)
QP_HEADS_FROM_WAITING_PER_SHARE = envint("QP_HEADS_FROM_WAITING_PER_SHARE", 50)
QP_FULL_PLAN_SECONDS = envint("QP_FULL_PLAN_SECONDS", 300)
QP_FULL_PLAN_CHECK_SECONDS = envint("QP_FULL_PLAN_CHECK_SECONDS", 30)  # beat looks this often
# /healthz answers 503 when an ENABLED queue has not ticked for this long (beat or worker down).
QP_HEALTH_TICK_AGE = envint("QP_HEALTH_TICK_AGE", max(30, 5 * QP_TICK_SECONDS))
# Beat prunes utilization samples older than QP_CHART_HOURS (the chart's longest window) and
# scheduler runs older than QP_HISTORY_HOURS.
QP_CHART_HOURS = envint("QP_CHART_HOURS", 7 * 24)
QP_HISTORY_HOURS = envint("QP_HISTORY_HOURS", 24)
# Start-time estimates of RUNNABLE jobs are refreshed this often per queue, each a forward
# simulation of at most QP_ESTIMATE_MAX_WAITING waiting jobs (the rest get none).
QP_ESTIMATE_SECONDS = envint("QP_ESTIMATE_SECONDS", 10)
QP_ESTIMATE_MAX_WAITING = envint("QP_ESTIMATE_MAX_WAITING", 5000)
# Job events (webhooks, e-mail): where links in messages point, how long a webhook may take
# to answer, the longest pause between retries, how long a refused delivery is retried, how
# often the sweep looks for due retries, and whether a commit asks for a round at once.
QP_PUBLIC_URL = os.environ.get("QP_PUBLIC_URL", "http://127.0.0.1:8000")
QP_WEBHOOK_TIMEOUT = envint("QP_WEBHOOK_TIMEOUT", 10)
QP_WEBHOOK_MAX_BACKOFF = envint("QP_WEBHOOK_MAX_BACKOFF", 60)
QP_WEBHOOK_RETRY_HOURS = envint("QP_WEBHOOK_RETRY_HOURS", 24)
QP_NOTIFY_SWEEP_SECONDS = envint("QP_NOTIFY_SWEEP_SECONDS", 5)
QP_NOTIFY_AFTER_COMMIT = envbool("QP_NOTIFY_AFTER_COMMIT", True)
# E-mail to submitters who opt in: SMTP when QP_EMAIL_HOST is set, else printed (the demo).
MAILERS = {
    "default": (
        {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {
                "host": os.environ["QP_EMAIL_HOST"],
                "port": envint("QP_EMAIL_PORT", 25),
                "username": os.environ.get("QP_EMAIL_USER", ""),
                "password": os.environ.get("QP_EMAIL_PASSWORD", ""),
                "use_tls": envbool("QP_EMAIL_TLS", False),
                "timeout": 10,
            },
        }
        if os.environ.get("QP_EMAIL_HOST")
        else {"BACKEND": "django.core.mail.backends.console.EmailBackend"}
    )
}
DEFAULT_FROM_EMAIL = os.environ.get("QP_EMAIL_FROM", "quotaportal@localhost")
# Jobs' whole output (jobs.output): kept this many days, at most this many bytes
# per rank of an attempt (beyond it the backend sends no more).
QP_OUTPUT_RETENTION_DAYS = envint("QP_OUTPUT_RETENTION_DAYS", 30)
QP_OUTPUT_MAX_BYTES = envint("QP_OUTPUT_MAX_BYTES", 256 * 1024 * 1024)
# Between roll-ups of the hourly usage rows (reports count the hours not rolled up live).
QP_USAGE_ROLLUP_SECONDS = envint("QP_USAGE_ROLLUP_SECONDS", 300)
# What-if replays run in a Celery task; with this set they run in the web process instead.
QP_WHATIF_IN_PROCESS = os.environ.get("QP_WHATIF_IN_PROCESS", "") == "1"
# The Alibaba openb trace a what-if may replay (its folder or the folder above it).
QP_TRACE_DIR = os.environ.get("QP_TRACE_DIR", str(BASE_DIR / "var" / "traces"))

# Prometheus scrapes /metrics with `Authorization: Bearer $QP_METRICS_TOKEN`, or from an
# address in QP_METRICS_ALLOWED_IPS (comma-separated addresses or networks, e.g.
# 10.0.0.0/8,127.0.0.1). With neither set, /metrics refuses every scrape.
QP_METRICS_TOKEN = os.environ.get("QP_METRICS_TOKEN", "")


def _networks(text: str) -> list:
    try:
        return [ipaddress.ip_network(p.strip(), strict=False) for p in text.split(",") if p.strip()]
    except ValueError as err:
        raise ImproperlyConfigured(f"QP_METRICS_ALLOWED_IPS: {err}") from None


QP_METRICS_ALLOWED_IPS = _networks(os.environ.get("QP_METRICS_ALLOWED_IPS", ""))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "quotaportal.api.authentication.CachedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "quotaportal.api.parsers.ObjectJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "quotaportal.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "quotaportal.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "quotaportal API",
    # Shown atop the docs page (Markdown): the way back to the portal.
    "DESCRIPTION": (
        "Quota shares, jobs and capacity for shared GPU fleets. "
        "[Back to the portal](/) · [Jobs](/jobs/) · authenticate with `Authorization: Bearer qp_…` "
        "(a personal API token from [Access](/account/tokens/)) or a signed-in session."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs describe the API; they hold no data, so anyone may read them.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    # The docs UI is served from the package, so it works without internet access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "ResourceStateEnum": "quotaportal.quotas.models.State",
        "HostStateEnum": "quotaportal.hosts.models.HostState",
        "JobStatusEnum": "quotaportal.quotas.models.JobStatus",
        "EventDetailTypeEnum": "quotaportal.notifications.models.DetailType",
    },
}

# Celery: the broker is Redis, through kombu's transport with a worker that survives losing
# Redis (quotaportal.infra.broker); without REDIS_URL tasks run inline (embedded default).
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_BROKER_TRANSPORT = "quotaportal.infra.broker:Transport" if REDIS_URL else None
# Every key the broker writes (the task queues, `unacked`, `_kombu.binding.*`) starts with the
# deployment's prefix too, so deployments sharing a Redis database never share a task queue.
CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{QP_REDIS_PREFIX}:celery:"}
CELERY_RESULT_BACKEND = None
# Long tasks have a queue of their own, so no tick waits for them: `-X background` workers
# take the ticks, a `-Q background` one the long tasks; a worker given neither takes both.
CELERY_TASK_DEFAULT_QUEUE, BACKGROUND_QUEUE = "celery", "background"
CELERY_TASK_QUEUES = {CELERY_TASK_DEFAULT_QUEUE: {}, BACKGROUND_QUEUE: {}}
CELERY_TASK_ROUTES = {
    f"quotaportal.{name}": {"queue": BACKGROUND_QUEUE}
    for name in (
        "quotas.tasks.refresh_all_estimates",
        "quotas.tasks.plan_queues_fully",
        "quotas.tasks.run_what_if_task",
        "usage.tasks.roll_up_usage",
    )
}
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
CELERY_TASK_IGNORE_RESULT = True


def _periodic(task: str, seconds: float) -> dict:
    # A run that waited longer than a period is stale (a tick above all): the next replaces it.
    options = {"expires": max(seconds - 0.5, 0.5)}
    return {"task": f"quotaportal.{task}", "schedule": float(seconds), "options": options}


CELERY_BEAT_SCHEDULE = {
    "tick-all-queues": _periodic("quotas.tasks.tick_all_queues", QP_TICK_SECONDS),
    "deliver-notifications": _periodic(
        "notifications.tasks.deliver_notifications", QP_NOTIFY_SWEEP_SECONDS
    ),
    "roll-up-usage": _periodic("usage.tasks.roll_up_usage", QP_USAGE_ROLLUP_SECONDS),
    "plan-queues-fully": _periodic("quotas.tasks.plan_queues_fully", QP_FULL_PLAN_CHECK_SECONDS),
    "refresh-estimates": _periodic("quotas.tasks.refresh_all_estimates", QP_ESTIMATE_SECONDS),
}

# Errors go to stderr with their tracebacks in every mode, so a 500 under gunicorn or a
# failed tick in a Celery worker is never silent (Django's default logs them only in DEBUG).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(process)d: %(message)s"},
        "server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "filters": {"quiet_agents": {"()": "quotaportal.logs.QuietAgentRequests"}},
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "plain"},
        "server": {
            "class": "logging.StreamHandler",
            "formatter": "server",
            "filters": ["quiet_agents"],
        },
    },
    "root": {"handlers": ["stderr"], "level": os.environ.get("QP_LOG_LEVEL", "WARNING")},
    "loggers": {
        "django": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        "django.request": {"handlers": ["stderr"], "level": "ERROR", "propagate": False},
        # The embedded default's in-memory broker makes kombu warn about a missing host name.
        "kombu.connection": {"level": "ERROR"},
        # runserver's request lines, without the agents' heartbeats (QP_LOG_LEVEL=DEBUG and
        # the quotaportal.agents logger bring them back).
        "django.server": {"handlers": ["server"], "level": "INFO", "propagate": False},
    },
}
