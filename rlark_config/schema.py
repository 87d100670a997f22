"""Every setting of RLark Console: one field of the frozen :class:`Config` each.

A field carries its type (the annotation), its default, the environment variable that sets it, a one-line doc
(the README's configuration table is made from these: ``python -m rlark_config --markdown``) and the parser of
:mod:`rlark_config.parsers` that reads the variable. Durations are seconds, sizes bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlark_config import parsers as p

BASE_DIR = Path(__file__).resolve().parent.parent  # the checkout (or installed tree) holding manage.py
SUBID_SLOT = 65536  # subordinate ids a local job gets (clusters.runtime.local.idmap.SLOT)


def setting(env: str, default: Any, doc: str, parse: p.Parser, *, shown: str | None = None) -> Any:
    """A :class:`Config` field read from ``env`` by ``parse``; ``shown`` is the default as the README shows it
    (when the value itself would not say it, e.g. "random, kept in `var/secret.key`")."""
    return dataclasses.field(default=default, metadata={"env": env, "doc": doc, "parse": parse, "shown": shown})


@dataclass(frozen=True)
class Config:
    """The console's settings, loaded once per process by :func:`rlark_config.current`."""

    database_url: str = setting(
        "DATABASE_URL",
        "",
        "database (PostgreSQL: `postgres://user@host:5432/name`)",
        p.text,
        shown="`sqlite:///var/db.sqlite3`",
    )
    redis_url: str = setting(
        "REDIS_URL",
        "",
        "unset = in-memory channel layer and embedded SQLite Celery broker; set = Redis for both",
        p.text,
        shown="unset",
    )
    secret_key: str | None = setting(
        "RLARK_SECRET_KEY",
        None,
        "Django secret key (set it in production)",
        p.text_or_none,
        shown="random, kept in `var/secret.key`",
    )
    encryption_key: str | None = setting(
        "RLARK_ENCRYPTION_KEY",
        None,
        "key for secrets at rest (set it in production and keep it)",
        p.text_or_none,
        shown="random, kept in `var/encryption.key`",
    )
    allowed_hosts: tuple[str, ...] = setting(
        "ALLOWED_HOSTS",
        ("127.0.0.1", "localhost"),
        "host names served; a websocket's Origin (scheme, host and port) must be the page's own origin on one of"
        " these hosts or one of `CSRF_TRUSTED_ORIGINS`",
        p.comma_list,
    )
    csrf_trusted_origins: tuple[str, ...] = setting(
        "CSRF_TRUSTED_ORIGINS", (), "e.g. `https://console.example.com` behind a proxy", p.comma_list
    )
    trusted_proxies: tuple[str, ...] = setting(
        "RLARK_TRUSTED_PROXIES",
        (),
        "IPs/CIDRs of reverse proxies whose `X-Forwarded-For`/`-Proto` are believed; the client is the address the"
        " nearest trusted proxy saw (login rate limit, audit log, terminal sessions)",
        p.comma_list,
    )
    debug: bool = setting("DEBUG", False, "Django debug mode", p.words_flag)
    https: bool = setting("RLARK_HTTPS", False, "`1` in production: secure cookies, HSTS, HTTPS redirect", p.words_flag)
    serve_static: bool = setting(
        "RLARK_SERVE_STATIC",
        True,
        "serve static files from the ASGI app (set `0` behind a proxy that serves them)",
        p.words_flag,
    )
    web_workers: int | None = setting(
        "RLARK_WEB_WORKERS",
        None,
        "daphne worker processes of the web tier (`manage.py serve_web`, run by `runconsole` and docker-compose's"
        " `web`); 1..32",
        p.clamped_int(1, 32),
        shown="2 per core (2..8)",
    )
    web_tier: bool = setting(
        "RLARK_WEB_TIER",
        False,
        "`1` in the web tier's daphne workers (`serve_web` sets it; not set by hand): one cache shared by the"
        " workers (login rate limit), and the `RLARK_DB_POOL` default",
        p.one_flag,
    )
    db_pool: int | None = setting(
        "RLARK_DB_POOL",
        None,
        "PostgreSQL connections a process keeps in a pool (psycopg_pool through Django's `pool` option) for its"
        " next requests; 0 opens one per request. The web tier's daphne workers serve the job list twice as fast"
        " with it (`bench/web.py`). Blocking work of the websocket consumers and async views runs through"
        " `rlark_console/db_threads.in_thread`, which hands its connections back (they ran a pool dry before). A"
        " connection is checked before it is handed out (`CONN_HEALTH_CHECKS`), so after a PostgreSQL restart no"
        " request fails",
        p.clamped_int(0, empty=0),
        shown="4 in the web tier, else 0",
    )
    var_dir: Path = setting(
        "RLARK_VAR_DIR",
        BASE_DIR / "var",
        "state of the embedded default (SQLite, broker, keys, local runtime)",
        p.path,
        shown="`var/`",
    )
    local_root: Path = setting(
        "RLARK_LOCAL_ROOT",
        BASE_DIR / "var" / "local",
        "working directories, logs and storage of local Workers; `host-paths/<user>/` below it is each user's host"
        " directory on the demo cluster",
        p.path,
        shown="`var/local` (`local` in `RLARK_VAR_DIR`)",
    )
    local_job_networks: bool = setting(
        "RLARK_LOCAL_JOB_NETWORKS",
        True,
        "a root console gives every local job a network namespace of its own behind the host guard"
        " (docs/security.md); `0` runs local Workers on the host's loopback, and local clusters are then"
        " single-user",
        p.not_zero_flag,
    )
    local_hide: tuple[str, ...] = setting(
        "RLARK_LOCAL_HIDE", (), "further host paths (separated by `:`) no local Worker may read", p.path_list
    )
    sync_interval: float = setting(
        "RLARK_SYNC_INTERVAL", 10.0, "seconds between status syncs (Celery beat)", p.number(float, 0)
    )
    port: int = setting(
        "RLARK_PORT", 8000, "where `make run` listens (`make run PORT=9000` works too)", p.number(int, 0, 65535)
    )
    host: str = setting("RLARK_HOST", "127.0.0.1", "the address `make run` listens on", p.text)
    terminal_idle_timeout: float = setting(
        "RLARK_TERMINAL_IDLE_TIMEOUT",
        3600.0,
        "seconds before an idle WebTerminal session is closed (pings keep it alive until then)",
        p.number(float),
    )
    tensorboard_idle: float = setting(
        "RLARK_TENSORBOARD_IDLE",
        600.0,
        "seconds before a job's TensorBoard (Metrics tab → Open in TensorBoard) nobody used is stopped",
        p.number(float),
    )
    terminal_grace_period: float = setting(
        "RLARK_TERMINAL_GRACE_PERIOD",
        60.0,
        "seconds a WebTerminal shell waits for its browser to reconnect after a dropped connection (`0` = none)",
        p.number(float),
    )
    ssh_host: str = setting(
        "RLARK_SSH_HOST",
        "127.0.0.1",
        "where the SSH bastion listens (`manage.py sshgate`, started by `make run`)",
        p.text,
    )
    ssh_port: int = setting(
        "RLARK_SSH_PORT", 2222, "the SSH bastion's port (`manage.py sshgate`)", p.number(int, 0, 65535)
    )
    domain_relay_port: int = setting(
        "RLARK_DOMAIN_RELAY_PORT",
        2223,
        "where the network-domain relay listens (`manage.py domain_relay`), on 127.0.0.1 and on 100.127.255.1, the"
        " console address of isolated local clusters",
        p.number(int, 0, 65535),
    )
    domain_relay_listen: tuple[str, ...] = setting(
        "RLARK_DOMAIN_RELAY_LISTEN",
        (),
        "more IPv4 addresses the relay listens on, comma-separated (at most 16): where Kubernetes Pods reach the"
        " console (the address `RLARK_DOMAIN_RELAY_PUBLIC_HOST` names, or forwards to)",
        p.ipv4_list(16),
    )
    domain_relay_public_host: str = setting(
        "RLARK_DOMAIN_RELAY_PUBLIC_HOST",
        "",
        "where Kubernetes members reach the relay; set, the status sync writes each member's config and"
        " certificate into its Task's Secret",
        p.stripped,
    )
    domain_relay_public_port: int | None = setting(
        "RLARK_DOMAIN_RELAY_PUBLIC_PORT",
        None,
        "the relay's port as Kubernetes members reach it",
        p.port_or_none,
        shown="`RLARK_DOMAIN_RELAY_PORT`",
    )
    ssh_public_host: str = setting(
        "RLARK_SSH_PUBLIC_HOST",
        "",
        "the bastion host shown in `ssh -J` commands and `rlark ssh-config`",
        p.text,
        shown="the page's host",
    )
    ssh_public_port: int | None = setting(
        "RLARK_SSH_PUBLIC_PORT",
        None,
        "the bastion port shown in `ssh -J` commands and `rlark ssh-config`",
        p.port_or_none,
        shown="`RLARK_SSH_PORT`",
    )
    ssh_keepalive: float = setting("RLARK_SSH_KEEPALIVE", 30.0, "seconds between SSH keepalives", p.number(float, 0))
    ssh_check_interval: float = setting(
        "RLARK_SSH_CHECK_INTERVAL",
        5.0,
        "seconds between re-checks of open SSH sessions (Worker running, key registered, permission)",
        p.number(float, 0),
    )
    ssh_debug: bool = setting(
        "RLARK_SSH_DEBUG", False, "any value: the SSH bastion logs asyncssh's debug output", p.any_flag
    )
    k8s_connect_timeout: float = setting(
        "RLARK_K8S_CONNECT_TIMEOUT", 3.0, "connect timeout (s) of each Kubernetes API request", p.number(float, 0)
    )
    k8s_read_timeout: float = setting(
        "RLARK_K8S_READ_TIMEOUT", 15.0, "read timeout (s) of each Kubernetes API request", p.number(float, 0)
    )
    local_port_min: int = setting(
        "RLARK_LOCAL_PORT_MIN",
        20000,
        "first port of the range the local runtime gives its Ray nodes (blocks per job)",
        p.number(int, 0, 65535),
    )
    local_port_max: int = setting(
        "RLARK_LOCAL_PORT_MAX",
        32000,
        "end of the range the local runtime gives its Ray nodes",
        p.number(int, 0, 65535),
    )
    local_port_locks: Path = setting(
        "RLARK_LOCAL_PORT_LOCKS",
        Path("/tmp/rlark-local-ports"),
        "directory of the lock files by which local supervisors on one host share the port range",
        p.path,
    )
    local_ray_dashboard: bool = setting(
        "RLARK_LOCAL_RAY_DASHBOARD", False, "`1` starts the Ray dashboard of local jobs (loopback only)", p.one_flag
    )
    local_object_store_bytes: int = setting(
        "RLARK_LOCAL_OBJECT_STORE_BYTES",
        128 * 2**20,
        "Ray object store of each local Ray node",
        p.number(int, 0),
    )
    local_subid_start: int = setting(
        "RLARK_LOCAL_SUBID_START",
        1000000000,
        "first subordinate uid/gid (added for root to `/etc/subuid`/`subgid`) of the range from which a root"
        " console gives each local job 65,536 ids: root in its Workers is an unprivileged host uid",
        p.number(int, 0),
    )
    local_subid_count: int = setting(
        "RLARK_LOCAL_SUBID_COUNT",
        1024 * SUBID_SLOT,
        "size of that subordinate uid/gid range (at least 65536)",
        p.number(int, 0),
    )
    local_stop_grace: float = setting(
        "RLARK_LOCAL_STOP_GRACE",
        5.0,
        "seconds a stopped local Worker's process group has after SIGTERM before SIGKILL",
        p.number(float, 0),
    )
    local_backoff_base: float = setting(
        "RLARK_LOCAL_BACKOFF_BASE",
        10.0,
        "first delay (s) before a failed local Worker restarts; it doubles with each restart, up to 300",
        p.number(float, 0),
    )
    local_keep_pods: bool = setting(
        "RLARK_LOCAL_KEEP_PODS",
        False,
        "`1`: a stopping local supervisor leaves its Workers running (`local_supervisor --keep-pods`)",
        p.one_flag,
    )
    cluster_sync_deadline: float = setting(
        "RLARK_CLUSTER_SYNC_DEADLINE",
        5.0,
        "seconds a sync cycle waits for all clusters; one that misses it shows Offline with the reason and does"
        " not delay the others",
        p.number(float, 0),
    )
    sync_threads: int = setting(
        "RLARK_SYNC_THREADS",
        16,
        "threads of a process that read the clusters in a sync cycle (all clusters at once, each a few reads)",
        p.number(int, 1),
    )
    crashloop_limit: int = setting(
        "RLARK_CRASHLOOP_LIMIT",
        3,
        "restarts of a Worker after which the job shows `CrashLoop`",
        p.number(int, 0),
    )
    image_pull_grace: float = setting(
        "RLARK_IMAGE_PULL_GRACE",
        120.0,
        "seconds an image may fail to pull before the job shows `ImagePull`",
        p.number(float, 0),
    )
    log_probe_interval: float = setting(
        "RLARK_LOG_PROBE_INTERVAL",
        30.0,
        "about the seconds between reads of a running Header's log on Kubernetes in the periodic sync (syncs after"
        " an action or a watch event read at once); each header's own due time is this × a fixed factor in"
        " [0.5, 1.5), so probes spread out",
        p.number(float, 0),
    )
    log_scan_max_age: float = setting(
        "RLARK_LOG_SCAN_MAX_AGE",
        10.0,
        "seconds the Diagnosis tab and the Run check show a Worker's stored log scan (markers, first error, last"
        " stage) before its log is read again; older scans are shown with their time while the new lines are read"
        " in the background (`jobs/observe/log_scans.py`)",
        p.number(float),
    )
    request_cpu_seconds: float = setting(
        "RLARK_REQUEST_CPU_SECONDS",
        5.0,
        "CPU seconds one HTTP request may use before it is stopped with a 503 (`rlark_console/cpu_budget.py`; wall"
        " time spent waiting is not counted; `0` = no budget)",
        p.number(float),
    )
    max_request_bytes: int = setting(
        "RLARK_MAX_REQUEST_BYTES",
        10 * 2**20,
        "Largest request body accepted; a larger one is refused with a 413 (JSON under `/api/`, in the request's"
        " language) before it is read: on its `Content-Length`, or as a chunked body passes the limit"
        " (`rlark_console/bodylimit.py`, `rlark_console/daphne_worker.py`; `0` = no limit)",
        p.number(int),
        shown="`10485760` (10 MB)",
    )
    var_min_free_bytes: int = setting(
        "RLARK_VAR_MIN_FREE_BYTES",
        2**20,
        "Below this much free space in `var/` every page shows a banner that changes and status updates cannot be"
        " saved; a request that fails for lack of space (in `var/` or on PostgreSQL's disk) answers 503,"
        ' `{"code": "var_full", "detail"}` under `/api/`, and the status sync logs it as such'
        " (`rlark_console/varspace.py`)",
        p.number(int),
        shown="`1048576` (1 MB)",
    )
    log_probes_per_cycle: int = setting(
        "RLARK_LOG_PROBES_PER_CYCLE",
        100,
        "at most this many periodic Header log probes per cluster and sync cycle, the most overdue first (a steady"
        " cycle's log reads stay bounded at fleet scale)",
        p.number(int),
    )
    log_archive_max_bytes: int = setting(
        "RLARK_LOG_ARCHIVE_MAX_BYTES",
        256 * 2**20,
        "per-job cap (compressed bytes) of the archived full Worker logs; an admin can set a job's own cap in the"
        " back office",
        p.number(int, 0),
    )
    log_archive_retention_days: float = setting(
        "RLARK_LOG_ARCHIVE_RETENTION_DAYS",
        30.0,
        "how long a deleted job's archived logs stay downloadable (`/log-archives/`, `GET /api/v1/log-archives/`)",
        p.number(float, 0),
    )
    notify_allowed_hosts: tuple[str, ...] = setting(
        "RLARK_NOTIFY_ALLOWED_HOSTS",
        (),
        "hosts (comma-separated) a notification channel may reach over plain `http` or at a loopback, link-local"
        " or private address; every other channel URL must be `https` to a public address",
        p.comma_list,
    )
    notify_timeout: float = setting(
        "RLARK_NOTIFY_TIMEOUT",
        5.0,
        "seconds a notification receiver has to connect and answer (a delivery is retried 3 times with backoff)",
        p.number(float, 0.5, 30),
    )
    time_zone: str = setting(
        "TIME_ZONE",
        "Asia/Shanghai",
        "display time zone: every page shows its times in it and names it in the header (`CST (UTC+08:00)`); the"
        " API always answers in UTC, ISO 8601 with `Z`",
        p.text,
    )
    log_level: str = setting("LOG_LEVEL", "INFO", "level of the console's log (Python logging)", p.text)
    celery_task_always_eager: bool = setting(
        "CELERY_TASK_ALWAYS_EAGER",
        False,
        "`1` runs Celery tasks in the calling process (tests); no worker needed",
        p.words_flag,
    )


def fields() -> tuple[dataclasses.Field, ...]:
    """The fields of :class:`Config`, in order (every one is a :func:`setting`)."""
    return dataclasses.fields(Config)
