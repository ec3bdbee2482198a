"""Settings, all from the environment.

DATABASE_URL and REDIS_URL name real servers.  When they are unset, the URLs
of the embedded engines started by ``python -m controlplane.engines`` (or
``make up`` / ``make test``) are read from ``var/engines.json``.
"""

from __future__ import annotations

import os
import re
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from controlplane.engines import VAR_DIR, read_state

# VAR_DIR (./var, or CONTROLPLANE_VAR_DIR): the embedded engines' data and local state files. Apps
# read it as settings.VAR_DIR, never from controlplane.engines (the project package is the top floor).
VAR_DIR = VAR_DIR

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


PLACEHOLDER_KEYS = ("CHANGE_ME", "django-insecure-")


def _secret_key(debug: bool) -> str:
    """SECRET_KEY from the environment; unset, one generated once into VAR_DIR (``make up``), unless
    SECRET_KEY_GENERATE=0 (the image: each replica would sign with a key of its own). With DEBUG off a
    placeholder or short key refuses to start: sessions, CSRF tokens and password resets are signed with it."""
    key = os.environ.get("SECRET_KEY", "")
    if not key:
        if not env_bool("SECRET_KEY_GENERATE", True):
            raise ImproperlyConfigured(
                "SECRET_KEY is not set. Set it to a long random string, the same for every process, e.g. "
                "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'.")
        path = VAR_DIR / "secret_key"
        try:
            key = path.read_text().strip()
        except OSError:
            VAR_DIR.mkdir(parents=True, exist_ok=True)
            key = secrets.token_urlsafe(50)
            path.write_text(key)
            path.chmod(0o600)
    if not debug and (key.startswith(PLACEHOLDER_KEYS) or len(key) < 50 or len(set(key)) < 5):
        raise ImproperlyConfigured(
            "SECRET_KEY is a placeholder or too weak (fewer than 50 characters or 5 distinct ones) and DEBUG "
            "is off. Set it to a long random string, the same for every process, e.g. "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'.")
    return key


def _engine_url(name: str) -> str:
    url = os.environ.get(name) or read_state().get(name, "")
    if not url:
        raise RuntimeError(
            f"{name} is not set and no embedded engines are running. "
            "Use `make up`, or `.venv/bin/python -m controlplane.engines run -- <command>`."
        )
    return url


def database_from_url(url: str) -> dict[str, Any]:
    parts = urlparse(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise RuntimeError(f"DATABASE_URL must be a postgresql:// URL, got {parts.scheme!r}")
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or ""])[0]
    options: dict[str, Any] = {"application_name": os.environ.get("DB_APPLICATION_NAME", "controlplane")}
    pool_max = int(os.environ.get("DB_POOL_MAX_SIZE", "8"))
    if pool_max > 0:
        # A bounded pool per process (psycopg_pool): under ASGI every request thread
        # would otherwise keep a connection of its own. Connections are checked
        # before use (CONN_HEALTH_CHECKS), so a restarted server is survived.
        options["pool"] = {
            "min_size": min(pool_max, int(os.environ.get("DB_POOL_MIN_SIZE", "1"))),
            "max_size": pool_max,
            "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "10")),
            "max_idle": float(os.environ.get("DB_POOL_MAX_IDLE", "300")),
            "name": options["application_name"],
        }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "controlplane",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        # Pooling and persistent connections exclude each other; without a pool
        # (DB_POOL_MAX_SIZE=0, as the tests run) DB_CONN_MAX_AGE applies.
        "CONN_MAX_AGE": 0 if pool_max > 0 else int(os.environ.get("DB_CONN_MAX_AGE", "0")),
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": options,
        "TEST": {"NAME": os.environ.get("TEST_DATABASE_NAME", "test_controlplane")},
    }


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = _secret_key(DEBUG)
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "channels",
    "csp",
    "axes",
    # lintmigrations, and makemigrations --lint: migrations that two releases running at once survive
    # (docs/deploy.md); commands only, no models.
    "django_migration_linter",
    "apps.accounts",
    "apps.audit",
    "apps.inventory",
    "apps.agents",
    "apps.telemetry",
    "apps.planner",
    "apps.simulator",
    "apps.dashboard",
    "apps.operations",
    "apps.health",
    "apps.vectors",
    "apps.rollouts",
    # The project package itself: the process wiring (schedules) and the command that stores it.
    "controlplane",
]

MIDDLEWARE = [
    "apps.common.middleware.AsyncStreamMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "apps.common.middleware.RequestIdMiddleware",
    "apps.common.middleware.ApiVersionMiddleware",
    "apps.common.middleware.RequestMetricsMiddleware",
    "apps.common.middleware.ProbeMiddleware",  # PROBE_PATHS: before the host check
    "apps.common.middleware.BodySizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "apps.common.middleware.QueryParameterMiddleware",  # process_view: knows the operation
    "apps.common.middleware.ContentSecurityPolicyMiddleware",
    "axes.middleware.AxesMiddleware",  # last (django-axes): answers a locked-out login
]

# Response headers of every page (docs/security.md): no framing, no MIME sniffing, the referrer
# only to this origin, and a Content-Security-Policy with no inline or foreign scripts. Plotly
# sets inline styles, hence style-src 'unsafe-inline' (styles only). The websocket's ws:/wss:
# origin (this host) is added to connect-src per request (ContentSecurityPolicyMiddleware).
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Logging out of single sign-on sends the log-out form on to the provider's end-session endpoint.
_SSO_ORIGIN = "{0.scheme}://{0.netloc}".format(urlparse(os.environ.get("OIDC_ISSUER", "")))
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'", *([_SSO_ORIGIN] if os.environ.get("OIDC_ISSUER") else [])],
        "frame-ancestors": ["'none'"],
    },
}

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "controlplane.asgi.application"

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
                "apps.accounts.context_processors.roles",
            ],
            # {{ value|num }} in every template: figures printed one way (static/js/format.js the same)
            "builtins": ["apps.common.templatetags.numbers"],
        },
    },
]

DATABASES = {"default": database_from_url(_engine_url("DATABASE_URL"))}
REDIS_URL = _engine_url("REDIS_URL")

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "cp"),
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 caps a pool at 100 connections and raises beyond: a burst of websocket
        # connects (group_add each) needs more; Redis itself allows 10000 clients.
        # redis-py 8 also reads with a 5 s socket timeout by default, the very time channels_redis
        # blocks waiting for a consumer's next message (BZPOPMIN 5): on a quiet socket the read
        # timed out as the server's empty answer was due and the consumer died. Reads wait 15 s.
        "CONFIG": {"hosts": [{"address": REDIS_URL,
                              "max_connections": int(os.environ.get("CHANNEL_REDIS_MAX_CONNECTIONS", "1000")),
                              "socket_timeout": 15}],
                   "prefix": os.environ.get("CHANNEL_PREFIX", "cp")},
    }
}

# Login throttling (django-axes, docs/security.md): AXES_FAILURE_LIMIT failed logins in a row
# for one username, or from one client address, lock that username or address for
# AXES_COOLOFF_TIME; a successful login resets the count. The client address is REMOTE_ADDR:
# behind a reverse proxy, set AXES_CLIENT_IP_CALLABLE to read the proxy's header.
AUTHENTICATION_BACKENDS = [
    "apps.accounts.backends.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
# A lock lasts its cool-off from the lockout; attempts during it do not extend it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "apps.accounts.views.locked_out"
AXES_VERBOSE = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# Single sign-on (OpenID Connect, docs/security.md "Single sign-on"): on when OIDC_ISSUER and
# OIDC_CLIENT_ID are set. Then the local password login is for BREAK_GLASS_USERS only.
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").rstrip("/")
OIDC_DISCOVERY_URL = os.environ.get("OIDC_DISCOVERY_URL", "")  # default: <issuer>/.well-known/openid-configuration
OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "openid profile email")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups")
OIDC_USERNAME_CLAIM = os.environ.get("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUP_MAP = os.environ.get("OIDC_GROUP_MAP", "")  # team-hybrid=operator:tiers:hybrid_inference,fleet-admins=admin
OIDC_TIMEOUT_S = float(os.environ.get("OIDC_TIMEOUT_S", "10"))
BREAK_GLASS_USERS = [u.strip() for u in os.environ.get("BREAK_GLASS_USERS", "").split(",") if u.strip()]

LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise serves from finders until collectstatic
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve from the finders too, so a fresh checkout works before collectstatic.
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Telemetry ingest (apps/telemetry): the web process's own async pool for the lean
# ingest path (group commit into the buffer), and how long agent identities are cached.
TELEMETRY_INGEST_POOL_SIZE = int(os.environ.get("TELEMETRY_INGEST_POOL_SIZE", "4"))
TELEMETRY_INGEST_GROUP_MAX = int(os.environ.get("TELEMETRY_INGEST_GROUP_MAX", "500"))
TELEMETRY_KEY_CACHE_REFRESH_S = float(os.environ.get("TELEMETRY_KEY_CACHE_REFRESH_S", "10"))
TELEMETRY_PARTITION_HOURS = int(os.environ.get("TELEMETRY_PARTITION_HOURS", "1"))
TELEMETRY_PARTITIONS_AHEAD_HOURS = int(os.environ.get("TELEMETRY_PARTITIONS_AHEAD_HOURS", "6"))

# Largest request body the API accepts (bytes); larger bodies get 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("MAX_BODY_BYTES", str(5 * 1024 * 1024)))
MAX_BODY_BYTES = DATA_UPLOAD_MAX_MEMORY_SIZE

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.common.authentication.TokenAuthentication",
        "apps.accounts.authentication.ServiceTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["apps.common.permissions.IsViewer"],
    # JSON only (a vector suite's upload declares multipart itself): a form body cannot write null, a
    # list or a number, so every field the schema types would arrive as text and be refused.
    "DEFAULT_PARSER_CLASSES": ["apps.common.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "apps.common.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "apps.common.filters.StrictFilterBackend",
        "rest_framework.filters.SearchFilter",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "apps.common.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.common.errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["apps.common.throttling.WriteThrottle"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}

# Abuse limits (apps/common/throttling.py): "<count>/<s|min|hour|day>", "" for none.
API_WRITE_RATE = os.environ.get("API_WRITE_RATE", "300/min")      # per user, across web processes
TELEMETRY_RATE = os.environ.get("TELEMETRY_RATE", "600/min")      # per agent key, per web process

# The REST API's version: the schema's, and the X-API-Version header of every /api/ answer. The
# major number is the path's (/api/v1/); a change a client could misread bumps it.
API_VERSION = "1.0.0"

SPECTACULAR_SETTINGS = {
    "TITLE": "AI-module array control plane API",
    "DESCRIPTION": "Inventory, version pins, telemetry and fleet operations for AI-module arrays.",
    "VERSION": API_VERSION,
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its browser are for signed-in users (viewer and up), like the API itself.
    "SERVE_PERMISSIONS": ["apps.common.permissions.IsViewer"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "NodeStateEnum": "apps.inventory.choices.NodeState",
        "ModuleStateEnum": "apps.inventory.choices.ModuleState",
        "CombinationStateEnum": "apps.inventory.choices.CombinationState",
        "TierKindEnum": "apps.inventory.choices.TierKind",
        "FaultKindEnum": "apps.simulator.choices.FaultKind",
        "AgentKindEnum": "apps.agents.choices.AgentKind",
        "EnrolmentStateEnum": "apps.agents.choices.EnrolmentState",
        "BulkNodeActionEnum": "apps.operations.api.serializers.BULK_ACTIONS",
    },
}

# Celery: one app, queues named by the kind of work (see controlplane/celery.py).
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
# Every task is acknowledged when it ends, not when a worker takes it (each is safe to run twice,
# docs/architecture.md): a worker that dies mid-task leaves its message unacknowledged. A worker
# child killed alone is seen by its parent, which puts the message back at once; a whole worker
# killed (SIGKILL, OOM, a lost host) acknowledges nothing, and Redis has no consumer to notice:
# kombu keeps each delivered message in an "unacked" set and another worker puts it back on its
# queue once it is older than the visibility timeout. One prefetched task per child: a worker holds
# no message it is not running (a task with an ETA excepted), so a message's age is its run time.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The visibility timeout must exceed the longest a live worker keeps a message: the longest hard
# time limit (telemetry_retention, 660 s) and the longest ETA (health_notify's last retry, 80 s,
# plus its 40 s), or a task still running is delivered to a second worker. 900 s: a dead worker's
# task runs again within 15 minutes (Celery's default is an hour). Every worker looks for such
# messages every CELERY_RESTORE_INTERVAL_S (kombu's default looks only on every tenth tick, so
# about every 100 s). tests/test_celery_config.py holds the default above the tasks' limits.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(os.environ.get("CELERY_VISIBILITY_TIMEOUT_S", "900")),
    "unacked_restore_interval": float(os.environ.get("CELERY_RESTORE_INTERVAL_S", "10")),
    "unacked_restore_throttle": 1,
}
# Beat and the broadcaster run active/standby behind leases (apps/common/leases.py): a standby
# takes over within LEASE_TTL_S (and one poll) of the holder's last renewal.
CELERY_BEAT_SCHEDULER = "controlplane.beat:LeasedDatabaseScheduler"
LEASE_TTL_S = float(os.environ.get("LEASE_TTL_S", "10"))

# GET /metrics (apps/dashboard/metrics.py): with METRICS_TOKEN set, a scrape must send it as a
# bearer token; without it, only the addresses of METRICS_ALLOWED_IPS may scrape.
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = [a.strip() for a in os.environ.get("METRICS_ALLOWED_IPS", "127.0.0.1,::1").split(",")
                       if a.strip()]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Node lifecycle: a node silent this long becomes unreachable (apps/operations/controllers.py).
NODE_HEARTBEAT_TIMEOUT_S = float(os.environ.get("NODE_HEARTBEAT_TIMEOUT_S", "30"))
# Stuck states (apps/health/stuck.py): how long a rollout node's cordoning or uncordoning step is expected
# to take (a state change; it waits only on capacity or another owner's hold); stuck past twice it.
ROLLOUT_STEP_EXPECTED_S = float(os.environ.get("ROLLOUT_STEP_EXPECTED_S", "120"))
# The capacity function's parameters (apps/operations/capacity.py Params), e.g. {"target_util": 0.7}.
CAPACITY: dict[str, float] = {k.removeprefix("CAPACITY_").lower(): float(v) for k, v in os.environ.items()
                              if k.startswith("CAPACITY_")}

# HTTPS (docs/deploy.md). HTTPS_ONLY=1 where users reach the site over HTTPS, directly or through a
# proxy that terminates TLS: plain HTTP redirects to HTTPS, browsers are told to use nothing else
# for a year (HSTS), cookies go over HTTPS only. Off by default: `make up` serves plain HTTP.
# Each part can be set on its own. The probes (/healthz, /readyz) are answered before the redirect.
HTTPS_ONLY = env_bool("HTTPS_ONLY", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS_ONLY)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS_ONLY)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS_ONLY)
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", "31536000" if HTTPS_ONLY else "0"))
# Subdomains of the control plane's own host, and eligibility for browsers' preload lists (which
# only an apex domain can join): harmless for a host such as controlplane.example.org.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS_ONLY)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS_ONLY)
# Called by the pod's address over plain HTTP (orchestrators' probes, Prometheus's scrape): answered
# before the host check (ProbeMiddleware) and never redirected to HTTPS, which a kubelet would count
# as healthy whatever the answer.
PROBE_PATHS = ("/healthz", "/readyz", "/metrics")
SECURE_REDIRECT_EXEMPT = [rf"^{re.escape(path.lstrip('/'))}$" for path in PROBE_PATHS]
# TRUST_X_FORWARDED_PROTO=1 behind a proxy that terminates TLS and sets X-Forwarded-Proto (and drops
# a client's own): a request that reached the proxy over HTTPS counts as secure. Never without such
# a proxy in front: any client could then claim HTTPS.
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Logs on stderr: LOG_FORMAT=plain (default) for people, json for a log pipeline: one JSON object a
# line, with the request id the response returns in X-Request-ID (apps/common/logs.py). uvicorn's
# (in its worker processes) and Celery's own lines go through the same handler.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain")
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
                   "json": {"()": "apps.common.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        **({name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.error", "uvicorn.access")}
           if LOG_FORMAT == "json" else {}),
    },
}
# Celery replaces the root logger's handlers with its own format unless told not to.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
