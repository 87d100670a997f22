"""Django settings for RLark Console. Every deploy-time value comes from the environment through
:func:`rlark_config.current` (the typed settings; the configuration table in README.md is made from them)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import dj_database_url

import rlark_config

_config = rlark_config.current()
BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = _config.var_dir


def secure_var_dir(var_dir: Path, files: tuple[str, ...] = ()) -> None:
    """``var/`` holds the keys, the database and the broker: the directory is 0700,
    its files 0600 (SQLite's journal and WAL files copy the database's mode) and its subdirectories 0700.
    ``files`` are created empty with mode 0600 when missing, so they are never world-readable even for an
    instant. The local root's Pod directories keep the modes the supervisor gives them."""
    var_dir.mkdir(parents=True, exist_ok=True)
    var_dir.chmod(0o700)
    for name in files:
        os.close(os.open(var_dir / name, os.O_WRONLY | os.O_CREAT, 0o600))
    for entry in var_dir.iterdir():
        if entry.is_symlink():
            continue
        entry.chmod(0o700 if entry.is_dir() else 0o600)


VAR_DIR.mkdir(parents=True, exist_ok=True, mode=0o700)


def _dev_secret(filename: str) -> str:
    """A random secret kept in ``var/`` so development restarts keep sessions and ciphertexts."""
    path = VAR_DIR / filename
    if not path.exists() or not path.stat().st_size:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(48))
    return path.read_text().strip()


DEBUG = _config.debug
SECRET_KEY = _config.secret_key or _dev_secret("secret.key")
RLARK_ENCRYPTION_KEY = _config.encryption_key or _dev_secret("encryption.key")
ALLOWED_HOSTS = list(_config.allowed_hosts)
CSRF_TRUSTED_ORIGINS = list(_config.csrf_trusted_origins)
# Reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed (IPs or CIDRs, comma-separated; empty =
# none, the peer address is the client). See rlark_console/clientaddr.py.
RLARK_TRUSTED_PROXIES = list(_config.trusted_proxies)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "accounts",
    "clusters",
    "storage",
    "sshkeys",
    "domains",
    "jobs",
    "notifications",
    "terminal",
    "sshgate",
    "launcher",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "rlark_console.nul.RejectNulMiddleware",
    "rlark_console.varspace.DiskFullMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "rlark_console.cpu_budget.CPUBudgetMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "accounts.middleware.LoginRequiredMiddleware",
]

ROOT_URLCONF = "launcher.urls"
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
                "django.template.context_processors.i18n",
                "rlark_console.pagetime.page_time_zone",
                "rlark_console.varspace.var_status",
            ],
        },
    },
]
WSGI_APPLICATION = "launcher.wsgi.application"
ASGI_APPLICATION = "launcher.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        _config.database_url or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=0,
        # A connection is tested (one round trip, ~0.1 ms on loopback) before it is used again, and a broken one is
        # replaced: with the pool below, Django gives psycopg_pool ``check=ConnectionPool.check_connection``;
        # without a pool, Django checks a connection kept across requests. Unchecked, every pooled connection
        # failed once after a PostgreSQL restart (500s for 23-32 s).
        conn_health_checks=True,
    )
}
# A pool of database connections per process (psycopg_pool; Django's "pool" option), at most RLARK_DB_POOL of them.
# It spares each request a new PostgreSQL connection (~13 ms with its password check): the web tier serves the job
# list twice as fast with it (bench/web.py). Default: 4 in the web tier's daphne workers (RLARK_WEB_TIER=1), none
# elsewhere (Celery threads and management commands open one per task). Blocking work of async code goes through
# rlark_console.db_threads.in_thread, which gives back what it opened on its thread: asyncio.to_thread kept those
# connections, and a pool ran dry (PoolTimeout, tests/console/test_db_threads.py). Persistent connections
# (CONN_MAX_AGE) are no alternative: Django runs each ASGI request in a thread of its own, and every finished
# request's thread kept its connection ("too many clients").
WEB_TIER_POOL = 4
DB_POOL = _config.db_pool if _config.db_pool is not None else (WEB_TIER_POOL if _config.web_tier else 0)
if DB_POOL and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 1, "max_size": DB_POOL, "timeout": 10}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].update({"timeout": 30, "transaction_mode": "IMMEDIATE"})
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL;"

# Password logins give their database connection back while the password is hashed (a pooled one otherwise stays
# busy for the hash's ~0.5 s CPU, and simultaneous logins ran the pool dry).
AUTHENTICATION_BACKENDS = ["accounts.backends.PoolFriendlyModelBackend"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "zh-hans"
LANGUAGES = [("zh-hans", "中文"), ("en", "English")]  # each in its own name: the language menu shows them as they are
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = _config.time_zone
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = _config.redis_url
if REDIS_URL:
    # channels_redis waits on BZPOPMIN for up to 5 s (RedisChannelLayer.brpop_timeout) and redis-py 8 gives
    # every socket read a 5 s timeout by default (redis._defaults.DEFAULT_SOCKET_TIMEOUT): an idle websocket's
    # consumer then dies of redis TimeoutError and its socket closes. Reads get twice the blocking wait.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 10}]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = None
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}"
    CELERY_RESULT_BACKEND = None
# The web tier's daphne workers (rlark_console/webserver.py sets RLARK_WEB_TIER=1) share one cache, so the login
# rate limit (accounts/ratelimit.py) counts attempts across processes: Redis when set, else files in VAR_DIR.
# Other processes (and tests) keep Django's per-process default.
if _config.web_tier:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "cache")}
    }
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
secure_var_dir(
    VAR_DIR,
    tuple(
        Path(p).name
        for p in (str(DATABASES["default"].get("NAME") or ""), CELERY_BROKER_URL.removeprefix("sqla+sqlite:///"))
        if p.startswith("/") and Path(p).parent == VAR_DIR
    ),
)
CELERY_TASK_ALWAYS_EAGER = _config.celery_task_always_eager
RLARK_SYNC_INTERVAL = _config.sync_interval

REST_FRAMEWORK = {
    # one rule for API times: ISO 8601 in UTC with Z (rlark_console.apitime)
    "DEFAULT_RENDERER_CLASSES": [
        "rlark_console.apitime.UTCJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "rlark_console.jsonbody.ObjectJSONParser",
        "rest_framework.parsers.FormParser",
        "rlark_console.jsonbody.NulCheckingMultiPartParser",
    ],
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "accounts.authentication.APITokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "rlark_console.pagination.ConsolePagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "RLark Console API",
    "DESCRIPTION": "Submit, watch and debug RLinf reinforcement-learning jobs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # two models have a choice field "kind": each enum keeps a name of its own in the schema
    "ENUM_NAME_OVERRIDES": {
        "TrackingKindEnum": "accounts.models.TrackingCredential.Kind",
        "ChannelKindEnum": "notifications.models.Kind",
    },
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG and _config.https:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": _config.log_level},
    "loggers": {
        "rlark.audit": {"level": "INFO"},
        "django.channels.server": {"level": "WARNING"},
        # asyncssh logs every exec request's command line at INFO: commands may carry secrets, and the bastion's
        # audit rows deliberately never record them (README, "SSH into Workers")
        "asyncssh": {"level": "WARNING"},
    },
}

# Log archive (jobs.control.log_archive): per-job cap on the compressed logs kept after Stop/Delete
# (a job's own ``log_archive_max_bytes``, set by an admin, wins), and how long a deleted job's logs stay.
RLARK_LOG_ARCHIVE_MAX_BYTES = _config.log_archive_max_bytes
RLARK_LOG_ARCHIVE_RETENTION_DAYS = _config.log_archive_retention_days
# Notification channels (notifications.safety): hosts allowed over http or at a private address; receiver timeout.
RLARK_NOTIFY_ALLOWED_HOSTS = list(_config.notify_allowed_hosts)
RLARK_NOTIFY_TIMEOUT = _config.notify_timeout

# The local runtime keeps Pod working directories, logs and storage under here.
RLARK_LOCAL_ROOT = _config.local_root

# The embedded default serves static files from the ASGI app; behind a proxy set this to 0.
RLARK_SERVE_STATIC = _config.serve_static

# WebTerminal sessions close after this many idle seconds (keep-alive pings keep busy ones open).
RLARK_TERMINAL_IDLE_TIMEOUT = _config.terminal_idle_timeout
RLARK_TERMINAL_GRACE_PERIOD = _config.terminal_grace_period
# A job's TensorBoard nobody used for this many seconds is stopped (jobs.explain.tensorboard_server).
RLARK_TENSORBOARD_IDLE = _config.tensorboard_idle
# Kubernetes API calls: (connect, read) timeouts in seconds, per call.
RLARK_K8S_CONNECT_TIMEOUT = _config.k8s_connect_timeout
RLARK_K8S_READ_TIMEOUT = _config.k8s_read_timeout
# Status sync: seconds one cycle waits for all clusters together (a slower cluster shows Offline
# and does not delay the others), and seconds between two reads of a running header's new log lines on
# Kubernetes (which cannot report a log's size without reading it).
RLARK_CLUSTER_SYNC_DEADLINE = _config.cluster_sync_deadline
RLARK_LOG_PROBE_INTERVAL = _config.log_probe_interval
# Threads of one process that read the clusters in a cycle; restarts after which a Worker is CrashLoop; seconds an
# image may fail to pull before the job says ImagePull (jobs.observe.sync_fetch, jobs.observe.sync).
RLARK_SYNC_THREADS = _config.sync_threads
RLARK_CRASHLOOP_LIMIT = _config.crashloop_limit
RLARK_IMAGE_PULL_GRACE = _config.image_pull_grace
# Seconds the Diagnosis tab and the Run check show a Worker's stored log scan before reading its log again
# (in the background; jobs.observe.log_scans).
RLARK_LOG_SCAN_MAX_AGE = _config.log_scan_max_age
RLARK_LOG_PROBES_PER_CYCLE = _config.log_probes_per_cycle
RLARK_REQUEST_CPU_SECONDS = _config.request_cpu_seconds  # 0: no budget
# The largest request body accepted, in bytes (0: no limit). The console takes job documents, RLinf configs,
# kubeconfigs and TensorBoard plugin queries, all far smaller; a larger body is refused with a 413 before it is
# read (rlark_console.bodylimit). The WebTerminal's file uploads go over its websocket, in 32 KiB frames.
RLARK_MAX_REQUEST_BYTES = _config.max_request_bytes
# var/ counts as full below this many free bytes (rlark_console.varspace): every page shows a banner that changes
# and status updates cannot be saved; a write that fails for lack of space answers 503 (JSON under /api/).
RLARK_VAR_MIN_FREE_BYTES = _config.var_min_free_bytes
