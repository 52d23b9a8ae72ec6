"""Django settings: one module, every value from the environment through typed helpers.

Defaults suit local development (DEBUG on, SQLite and the embedded broker under var/). With
DEBUG off a SECRET_KEY is required and the security settings switch on; docs/configuration.md
lists every variable.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url

from solboard_common.config import (
    BROKER_VISIBILITY_TIMEOUT_S,
    SQLITE_BUSY_TIMEOUT_S,
    ConfigError,
    default_result_backend,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_path,
    env_str,
    var_dir,
)
from solboard_common.config import broker_url as _broker_url
from solboard_common.protocol import JobLimits

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = var_dir()

DEBUG = env_bool("DEBUG", True)

_DEV_SECRET_KEY = "django-insecure-solboard-local-development-only-never-in-production"
SECRET_KEY = env_str("SECRET_KEY") or ""
if not SECRET_KEY:
    if not DEBUG:
        raise ConfigError("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = _DEV_SECRET_KEY
# Old keys still accepted while rotating (runner credentials are derived from the key: see
# leaderboard/dispatch/credentials.py).
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
# The site's public address (no trailing slash): absolute links in what leaves the site (webhook
# payloads). Default: the development server's address with DEBUG, else https:// and the first host.
SITE_URL = (env_str("SITE_URL") or (f"http://127.0.0.1:{env_int('PORT', 8000, minimum=1)}" if DEBUG else
            f"https://{ALLOWED_HOSTS[0]}" if ALLOWED_HOSTS else "")).rstrip("/")
if SITE_URL and not SITE_URL.startswith(("http://", "https://")):
    raise ConfigError(f"SITE_URL: {SITE_URL!r} must start with http:// or https://")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by the site: /api/docs/ works offline
    "django_htmx",
    "axes",  # failed-login counts and lockouts (leaderboard/throttling.py)
    "leaderboard",
]

MIDDLEWARE = [
    "leaderboard.metrics.RequestLatencyMiddleware",  # /metrics: every request timed, cached pages included
    # Then: an anonymous visitor's home or problem page comes from the cache before any other work.
    "leaderboard.web.pagecache.AnonymousPageCacheMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "leaderboard.static_files.WhiteNoiseMiddleware",  # whitenoise, async-capable (see its docstring)
    "leaderboard.api.errors.ErrorEnvelopeMiddleware",  # /api/: 413 before reading a body; JSON errors
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx: the report's live status fragment
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: a locked-out login becomes a 429
]

# Logins (web form, admin, HTTP Basic on /api/tokens) pass axes first: it refuses a locked-out
# address or username before the password is even checked (leaderboard/throttling.py).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("SOLBOARD_LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("SOLBOARD_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
# Either suffices: one address guessing many users, or many addresses guessing one user.
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "leaderboard.throttling.client_ip"
AXES_LOCKOUT_CALLABLE = "leaderboard.throttling.lockout_response"
# Reverse proxies in front of the site: the client address is this many entries from the right of
# X-Forwarded-For (0: REMOTE_ADDR, no proxy). Wrong here, every client shares the proxy's lockout.
SOLBOARD_TRUSTED_PROXIES = env_int("SOLBOARD_TRUSTED_PROXIES", 0, minimum=0)
# API tokens one user may create per hour (a token is cheap to make and costly to hunt down).
SOLBOARD_TOKENS_PER_HOUR = env_int("SOLBOARD_TOKENS_PER_HOUR", 30, minimum=1)

ROOT_URLCONF = "leaderboard.urls"
WSGI_APPLICATION = "leaderboard.wsgi.application"
ASGI_APPLICATION = "leaderboard.asgi.application"

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
        },
    },
]


def _database(url: str) -> dict[str, Any]:
    try:
        # 0 by default: under the ASGI server each request's sync code runs in a thread of its own,
        # and a persistent connection per thread would pile up (Django's docs on ASGI say the same).
        max_age = env_int("DATABASE_CONN_MAX_AGE", 0, minimum=0)
        config: dict[str, Any] = dict(
            dj_database_url.parse(url, conn_max_age=max_age, conn_health_checks=True)
        )
    except ValueError as error:
        raise ConfigError(f"DATABASE_URL={url!r} cannot be parsed: {error}") from None
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # Web, site worker and management commands share the file: WAL lets readers work while
        # one process writes, IMMEDIATE transactions take the write lock up front (no deadlock
        # on upgrade), and the busy timeout waits for it instead of failing "database is locked".
        config["CONN_MAX_AGE"] = 0
        config["OPTIONS"] = {
            "timeout": SQLITE_BUSY_TIMEOUT_S,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        }
    return config


DATABASE_URL = env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {"default": _database(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# The website's sign-in (leaderboard/web/accounts.py); `next` is only followed to this site.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# collectstatic's target (production); whitenoise serves it. Created so whitenoise finds it in dev too.
STATIC_ROOT = env_path("STATIC_ROOT", VAR_DIR / "staticfiles")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# Uploads: a kernel is text; anything larger than this is refused before it reaches a runner.
SOLBOARD_MAX_SOURCE_BYTES = env_int("SOLBOARD_MAX_SOURCE_BYTES", 512 * 1024, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int(
    "DATA_UPLOAD_MAX_MEMORY_SIZE", 2 * SOLBOARD_MAX_SOURCE_BYTES + 64 * 1024, minimum=1024
)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE

# Compiling uploads on the site (leaderboard/compile_limits.py): nvcc/ptxas limits per run, compiles at
# once per host and per user, how long a request waits for a slot, and compile time per user per hour.
SOLBOARD_COMPILE_SECONDS = env_float("SOLBOARD_COMPILE_SECONDS", 60.0, minimum=1)
SOLBOARD_COMPILE_SLOTS = env_int("SOLBOARD_COMPILE_SLOTS", max(1, (os.cpu_count() or 2) // 2), minimum=1)
SOLBOARD_COMPILE_SLOTS_PER_USER = env_int("SOLBOARD_COMPILE_SLOTS_PER_USER", 1, minimum=1)
SOLBOARD_COMPILE_WAIT_SECONDS = env_float("SOLBOARD_COMPILE_WAIT_SECONDS", 5.0, minimum=0)
SOLBOARD_COMPILE_SECONDS_PER_HOUR = env_int("SOLBOARD_COMPILE_SECONDS_PER_HOUR", 900, minimum=1)
# A #define expanding to more tokens than this is refused before the preprocessor runs (a macro bomb).
SOLBOARD_MAX_MACRO_TOKENS = env_int("SOLBOARD_MAX_MACRO_TOKENS", 1_000_000, minimum=1000)
# Dry runs (/api/submissions/validate) and batch items per user per hour: checks cost the site work.
SOLBOARD_CHECKS_PER_HOUR = env_int("SOLBOARD_CHECKS_PER_HOUR", 600, minimum=1)

# The GPU type that `make run` targets: the CPU development device unless a GPU host says otherwise.
SOLBOARD_DEV_GPU_TYPE = env_str("SOLBOARD_DEV_GPU_TYPE", "cpu")
# A runner that has not sent a heartbeat for this long is considered gone.
SOLBOARD_RUNNER_STALE_SECONDS = env_int("SOLBOARD_RUNNER_STALE_SECONDS", 90, minimum=5)
# Dispatch (docs/runners.md): read here once, so a bad value stops the process at start instead of
# failing later inside a task or an on_commit hook, where it would only be logged.
# Evaluations of one user handed to the broker at once per GPU type (fair scheduling).
SOLBOARD_MAX_INFLIGHT_PER_USER = env_int("SOLBOARD_MAX_INFLIGHT_PER_USER", 4, minimum=1)
# A runner message signed further than this from the site's clock is refused.
SOLBOARD_RUNNER_MESSAGE_WINDOW_SECONDS = env_int("SOLBOARD_RUNNER_MESSAGE_WINDOW_SECONDS", 300, minimum=10)
# Minimum time between two heartbeat-triggered sweeps of one site process.
SOLBOARD_SWEEP_SECONDS = env_float("SOLBOARD_SWEEP_SECONDS", 10.0, minimum=0.5)
# Handed to the broker but never started for this long: handed over again (outlasts a redelivery).
SOLBOARD_BROKER_WAIT_MAX_SECONDS = env_float(
    "SOLBOARD_BROKER_WAIT_MAX_SECONDS", BROKER_VISIBILITY_TIMEOUT_S + 600.0, minimum=1)
# Stage limits sent with every job (defaults: the protocol's JobLimits).
_JOB_LIMITS = JobLimits()
SOLBOARD_JOB_COMPILE_SECONDS = env_float(
    "SOLBOARD_JOB_COMPILE_SECONDS", _JOB_LIMITS.compile_seconds, minimum=1
)
SOLBOARD_JOB_TEST_SECONDS = env_float("SOLBOARD_JOB_TEST_SECONDS", _JOB_LIMITS.test_seconds, minimum=1)
SOLBOARD_JOB_RANKED_SECONDS = env_float("SOLBOARD_JOB_RANKED_SECONDS", _JOB_LIMITS.ranked_seconds, minimum=1)
# The website serves a ranking board or the home page's tables rendered at most this long ago
# (0: never cached).
SOLBOARD_WEB_CACHE_SECONDS = env_int("SOLBOARD_WEB_CACHE_SECONDS", 10, minimum=0)
# An anonymous visitor's problem page is rebuilt when a result changes it, and at least this often.
SOLBOARD_WEB_PAGE_SECONDS = env_int("SOLBOARD_WEB_PAGE_SECONDS", 300, minimum=1)
# The cache of pages and their data versions (leaderboard/web/cache.py). redis://host:6379/2 (production):
# shared by every web process and the site worker. file:///abs/dir (what `make run` uses, in
# $SOLBOARD_VAR/cache): shared by the processes of one machine, so a result the site worker stores
# reaches the web process's pages. Unset: each process keeps its own (local memory; the tests).
SOLBOARD_CACHE_URL = env_str("SOLBOARD_CACHE_URL") or ""


def _cache(url: str) -> dict[str, Any]:
    if not url:
        return {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    if url.startswith(("redis://", "rediss://", "unix://")):
        return {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    if url.startswith("file:///"):
        # Version tokens are small and never expire: far fewer entries than this, so a cull (which
        # drops a third of the files at random) never runs in practice.
        return {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": url[len("file://"):],
                "OPTIONS": {"MAX_ENTRIES": 100_000}}
    raise ConfigError(f"SOLBOARD_CACHE_URL: {url!r} is neither redis://..., rediss://..., unix://... nor file:///dir")


CACHES = {"default": _cache(SOLBOARD_CACHE_URL)}

# Celery (leaderboard/celery.py reads these; solboard_common/config.py holds what both apps share).
CELERY_BROKER_URL = _broker_url()
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or default_result_backend()

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    # JSON only, with limits on nesting and on the number of values (400 json_too_deep / _many_values).
    "DEFAULT_PARSER_CLASSES": ["leaderboard.api.parsers.BoundedJSONParser"],
    "EXCEPTION_HANDLER": "leaderboard.api.errors.exception_handler",  # {"error": {code, message, field}}
}
SPECTACULAR_SETTINGS = {
    "TITLE": "SOLboard API",
    "DESCRIPTION": "Submit GPU kernels, follow their evaluation, read rankings and reports.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the site's own static files (pinned by drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}


def _limits_by_key(name: str) -> dict[str, int]:
    """``h100=50,b200=20`` -> {"h100": 50, "b200": 20}."""
    limits = {}
    for item in env_list(name, []):
        key, _, value = item.partition("=")
        if not key.strip() or not value.strip().isdigit():
            raise ConfigError(f"{name}: {item!r} is not KEY=COUNT (e.g. h100=50)")
        limits[key.strip()] = int(value)
    return limits


# The API (docs/api.md): quotas, waiting, webhooks.
SOLBOARD_QUOTA_MAX_QUEUED = env_int("SOLBOARD_QUOTA_MAX_QUEUED", 32, minimum=1)
SOLBOARD_QUOTA_DAILY_PER_PROBLEM = env_int("SOLBOARD_QUOTA_DAILY_PER_PROBLEM", 200, minimum=1)
SOLBOARD_QUOTA_DAILY_BY_GPU = _limits_by_key("SOLBOARD_QUOTA_DAILY_BY_GPU")
# GPU-seconds per UTC day (leaderboard/gpu_time.py), per user and per API token; 0: no limit.
SOLBOARD_QUOTA_GPU_SECONDS_PER_DAY = env_float("SOLBOARD_QUOTA_GPU_SECONDS_PER_DAY", 0.0, minimum=0.0)
SOLBOARD_QUOTA_TOKEN_GPU_SECONDS_PER_DAY = env_float(
    "SOLBOARD_QUOTA_TOKEN_GPU_SECONDS_PER_DAY", 0.0, minimum=0.0
)
SOLBOARD_API_MAX_WAIT_SECONDS = env_int("SOLBOARD_API_MAX_WAIT_SECONDS", 60, minimum=1)
SOLBOARD_WAIT_POLL_SECONDS = env_float("SOLBOARD_WAIT_POLL_SECONDS", 0.5, minimum=0.05)
SOLBOARD_WEBHOOK_MAX_ATTEMPTS = env_int("SOLBOARD_WEBHOOK_MAX_ATTEMPTS", 8, minimum=1)
SOLBOARD_WEBHOOK_TIMEOUT_SECONDS = env_float("SOLBOARD_WEBHOOK_TIMEOUT_SECONDS", 5.0, minimum=0.5)
# Callback URLs on loopback/private addresses: allowed in development only (no probing of the site's network).
SOLBOARD_WEBHOOK_ALLOW_PRIVATE = env_bool("SOLBOARD_WEBHOOK_ALLOW_PRIVATE", DEBUG)

# Production: everything below switches on when DEBUG is off (`manage.py check --deploy` passes).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Load balancers probe /healthz and Prometheus scrapes /metrics over plain HTTP: they answer, never redirect.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
# /metrics (leaderboard/metrics.py): with a token, `Authorization: Bearer <token>`; without, loopback only.
SOLBOARD_METRICS_TOKEN = env_str("SOLBOARD_METRICS_TOKEN") or ""

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# json: one JSON object per line (time, level, logger, message, exception), for a log collector.
LOG_FORMAT = env_str("LOG_FORMAT", "plain" if DEBUG else "json")
if LOG_FORMAT not in ("plain", "json"):
    raise ConfigError(f"LOG_FORMAT={LOG_FORMAT!r} is neither plain nor json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
        "json": {"()": "pythonjsonlogger.json.JsonFormatter", "timestamp": True,
                 "format": "%(levelname)s %(name)s %(message)s %(process)d"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
