"""How the processes run: Redis and Celery, and the processes `make run` starts (rag_site/rag_run)."""

from datetime import timedelta
from pathlib import Path

from rag_site.settings.base import TIME_ZONE, VAR_DIR
from rag_site.settings_registry import read_bool, read_int, read_str, read_url
from sources.queues import BULK, task_routes

# --- Celery -----------------------------------------------------------------
REDIS_URL = read_url("REDIS_URL")
CELERY_BROKER_URL = REDIS_URL or "redis://127.0.0.1:6379/0"
CELERY_TASK_TIME_LIMIT = read_int("CELERY_TASK_TIME_LIMIT")
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# With acks_late a task whose worker dies is redelivered; it must be safe to
# rerun (indexing compares content hashes), and Redis must not redeliver a
# task that is still running: the visibility timeout exceeds the time limit.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A request that queues work (a save, a memory) publishes to the broker on its own thread: a broker that accepts
# connections but never answers (frozen, a half-open link) held a memory write for as long as it stayed so (30 s
# with Valkey stopped by SIGSTOP, and searches waited for the threads). kombu's default is no socket timeout at all.
# A local broker answers a publish in well under a millisecond; after BROKER_TIMEOUT_SECONDS it is taken as away,
# and the send is recorded as waiting for the broker (sources/queueing.py) instead. Workers consume through the
# event loop, where this timeout does not apply to BRPOP (kombu's health check drops a stale one).
BROKER_TIMEOUT_SECONDS = 1.0
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_TASK_TIME_LIMIT * 2,
    "socket_timeout": BROKER_TIMEOUT_SECONDS,
    "socket_connect_timeout": BROKER_TIMEOUT_SECONDS,
    "socket_keepalive": True,
}
# One retry, at once (a connection gone stale across a broker restart reconnects), not Celery's default three:
# each attempt against a frozen broker costs a timeout or more (a new connection's handshake waits too), so a
# failing publish gives up after about three timeouts, and the recovery sweep sends it again later.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
# Two queues, each with its own worker, so a save never waits behind a full index job (sources/queues.py
# decides; job messages name their queue when sent). Anything unnamed is bulk.
CELERY_TASK_ROUTES = task_routes()
CELERY_TASK_DEFAULT_QUEUE = BULK
# django-celery-beat's DatabaseScheduler, touching a file on every tick for the health check.
CELERY_BEAT_SCHEDULER = "rag_site.beat:HeartbeatScheduler"
CELERY_TIMEZONE = TIME_ZONE

# --- Backups (rag_site/backup/) ------------------------------------------------
RAG_BACKUP_DIR = Path(read_str("RAG_BACKUP_DIR") or VAR_DIR / "backups").resolve()
RAG_BACKUP_HOURS = read_int("RAG_BACKUP_HOURS")
RAG_BACKUP_KEEP = read_int("RAG_BACKUP_KEEP")
RAG_PG_BIN_DIR = read_str("RAG_PG_BIN_DIR")
# django-celery-beat copies this into its table at start, where admins see it. Set back to 0 the entry stays
# there, and the task does nothing while RAG_BACKUP_HOURS is 0.
CELERY_BEAT_SCHEDULE = (
    {
        "Back up the database": {
            "task": "rag_site.tasks.backup_scheduled_task",
            "schedule": timedelta(hours=RAG_BACKUP_HOURS),
        }
    }
    if RAG_BACKUP_HOURS
    else {}
)

# --- `make run` -------------------------------------------------------------
# (RAG_EMBEDDED_SHARED_BUFFERS, also of this topic, is read by rag_site/embedded.py as the server starts.)
RAG_BIND = read_str("RAG_BIND")
RAG_WEB_WORKERS = read_int("RAG_WEB_WORKERS")
RAG_WEB_THREADS = read_int("RAG_WEB_THREADS")
RAG_WORKER_CONCURRENCY = read_int("RAG_WORKER_CONCURRENCY")
RAG_WATCH = read_bool("RAG_WATCH")
RAG_INTERACTIVE_CONCURRENCY = read_int("RAG_INTERACTIVE_CONCURRENCY")
