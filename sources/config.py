"""The corpus's config objects and their builders: the one sources module (besides the edges) that reads settings.

Engines (ingest, contextual descriptions, jobs, roots) take these objects;
the edges (Celery tasks, the admin, the API router, signal receivers) build
them once per call with the builders below, which read ``django.conf.settings``
at call time: tests change settings with pytest-django's ``settings`` fixture.
"""

from dataclasses import dataclass

from django.conf import settings

from kernel.config import llm_config
from sources.connectors.web.crawl import CrawlLimits
from sources.contextual import ContextualConfig, contextual_identity
from sources.extract import Limits


@dataclass(frozen=True, slots=True)
class IngestSettings:
    """Everything besides the text and the model that decides the stored chunks (sources.ingest.fingerprint)."""

    max_chars: int
    overlap: int
    long_texts: str  # RAG_EMBED_LONG_TEXTS: "truncate" or "pieces"
    contextual: str = ""  # the contextual-description model's identity; "" = no descriptions

    @classmethod
    def current(cls) -> "IngestSettings":
        return ingest_settings()


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    """Which model embeds by default and how; none of it changes the stored vectors' meaning beyond the model."""

    model: str  # RAG_EMBEDDING_MODEL: the reference of the model a root or segment without its own uses
    device: str
    batch_size: int
    flush_chunks: int  # RAG_INDEX_FLUSH_CHUNKS: chunks collected across documents per embedding call
    # RAG_EMBEDDING_BACKEND: what runs a local model; it becomes part of the model's name (embedding/backends.py)
    backend: str = "onnx"
    # RAG_HNSW_EF_CONSTRUCTION: how well a new model's HNSW index links its vectors (sources/ingest.py)
    hnsw_ef_construction: int = 200


@dataclass(frozen=True, slots=True)
class IndexingConfig:
    """Everything indexing a skill, a tool, a root or a dataset reads, built once at the edge."""

    ingest: IngestSettings
    embedding: EmbeddingConfig
    contextual: ContextualConfig
    max_skill_bytes: int
    extract: Limits  # RAG_EXTRACT_*: what one document's extraction may take
    max_document_bytes: int  # RAG_EXTRACT_MAX_FILE_MB: a larger document is left out unread
    git: "GitConfig | None" = None  # git roots' clones and timeout; None: git roots cannot be indexed


@dataclass(frozen=True, slots=True)
class JobsConfig:
    """RAG_JOB_*: how often a job is tried, and how long a running one may make no progress."""

    max_attempts: int
    stale_seconds: int


def contextual_config() -> ContextualConfig:
    return ContextualConfig(
        enabled=settings.RAG_CONTEXTUAL_RETRIEVAL,
        model=settings.RAG_CONTEXTUAL_MODEL,
        max_tokens=settings.RAG_CONTEXTUAL_MAX_TOKENS,
        concurrency=settings.RAG_CONTEXTUAL_CONCURRENCY,
        llm=llm_config(),
    )


def ingest_settings() -> IngestSettings:
    return IngestSettings(
        max_chars=settings.RAG_CHUNK_MAX_CHARS,
        overlap=settings.RAG_CHUNK_OVERLAP,
        long_texts=settings.RAG_EMBED_LONG_TEXTS,
        contextual=contextual_identity(contextual_config()),
    )


def embedding_config() -> EmbeddingConfig:
    return EmbeddingConfig(
        model=settings.RAG_EMBEDDING_MODEL,
        device=settings.RAG_EMBEDDING_DEVICE,
        batch_size=settings.RAG_EMBED_BATCH_SIZE,
        flush_chunks=settings.RAG_INDEX_FLUSH_CHUNKS,
        backend=settings.RAG_EMBEDDING_BACKEND,
        hnsw_ef_construction=settings.RAG_HNSW_EF_CONSTRUCTION,
    )


def indexing_config() -> IndexingConfig:
    return IndexingConfig(
        ingest=ingest_settings(),
        embedding=embedding_config(),
        contextual=contextual_config(),
        max_skill_bytes=settings.RAG_MAX_SKILL_BYTES,
        extract=extract_limits(),
        max_document_bytes=document_max_bytes(),
        git=git_config(),
    )


def extract_limits() -> Limits:
    """RAG_EXTRACT_*: what one extraction may take, at index time and when read, grep or the viewer re-extract."""
    return Limits(
        max_pages=settings.RAG_EXTRACT_MAX_PAGES,
        max_unpacked_bytes=settings.RAG_EXTRACT_MAX_MEMORY_MB * 1024 * 1024,
        timeout_seconds=settings.RAG_EXTRACT_TIMEOUT_SECONDS,
        max_memory_mb=settings.RAG_EXTRACT_MAX_MEMORY_MB,
    )


def document_max_bytes() -> int:
    """RAG_EXTRACT_MAX_FILE_MB in bytes: the largest document a root reads or an upload accepts."""
    return settings.RAG_EXTRACT_MAX_FILE_MB * 1024 * 1024


def jobs_config() -> JobsConfig:
    return JobsConfig(max_attempts=settings.RAG_JOB_MAX_ATTEMPTS, stale_seconds=settings.RAG_JOB_STALE_SECONDS)


def root_base_dirs() -> tuple[str, ...]:
    """RAG_ROOT_BASE_DIRS: the directories a workspace root must lie under (resolved paths), and the data
    directory's git checkouts (git roots, whose path the system sets)."""
    return (*settings.RAG_ROOT_BASE_DIRS, str(git_dir()))


@dataclass(frozen=True, slots=True)
class GitConfig:
    """Where git roots are cloned (RAG_VAR_DIR/git) and how long one git command may take."""

    directory: str
    timeout_seconds: int
    # RAG_ROOT_BASE_DIRS: a file:// remote must lie under one, as a directory root must (no reading the server's
    # other repositories through a URL).
    local_bases: tuple[str, ...] = ()
    # RAG_GIT_CREDENTIALS_DIR: the credentials the operator bound, each to a host (sources/git_credentials.py).
    credentials_dir: str = ""
    allow_http: bool = False  # RAG_GIT_ALLOW_HTTP: http:// remotes, never with a credential


def git_dir() -> str:
    """RAG_VAR_DIR/git: one clone (``<key>.git``) and one checkout (``<key>/``) per git root."""
    return str(settings.VAR_DIR / "git")


def webhook_key() -> str:
    """SECRET_KEY: git roots' webhook secrets are derived from it (sources/git_hooks.py)."""
    return settings.SECRET_KEY


def git_config() -> GitConfig:
    return GitConfig(
        directory=git_dir(),
        timeout_seconds=settings.RAG_GIT_TIMEOUT_SECONDS,
        local_bases=tuple(settings.RAG_ROOT_BASE_DIRS),
        credentials_dir=settings.RAG_GIT_CREDENTIALS_DIR,
        allow_http=settings.RAG_GIT_ALLOW_HTTP,
    )


def skill_reverify_minutes() -> int:
    """RAG_SKILL_REVERIFY_MINUTES: the interval of the skills' re-verify schedule (0: off)."""
    return settings.RAG_SKILL_REVERIFY_MINUTES


def watch_enabled() -> bool:
    """RAG_WATCH: whether the watcher queues jobs for changed files (off: it idles; roots change at re-verify)."""
    return settings.RAG_WATCH


def memory_approval_required() -> bool:
    """RAG_MEMORY_REQUIRE_APPROVAL: a new memory is held, unserved, until an admin approves it."""
    return settings.RAG_MEMORY_REQUIRE_APPROVAL


def web_limits() -> CrawlLimits:
    """RAG_WEB_*: what one crawl of a web root may reach (private addresses or not) and take."""
    return CrawlLimits(
        max_pages=settings.RAG_WEB_MAX_PAGES,
        max_page_bytes=settings.RAG_WEB_MAX_PAGE_MB * 1024 * 1024,
        max_total_bytes=settings.RAG_WEB_MAX_CRAWL_MB * 1024 * 1024,
        max_seconds=float(settings.RAG_WEB_MAX_CRAWL_SECONDS),
        allow_private=settings.RAG_WEB_ALLOW_PRIVATE,
    )
