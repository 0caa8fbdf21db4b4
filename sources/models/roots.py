"""Workspace roots, their segments, per-file index state and jobs."""

from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from sources.models.base import EmbeddingModel, Scoped, Source, _scope_names
from sources.sensitive import DEFAULT_DENY

DEFAULT_INCLUDE = (
    "*.py *.pyi *.ipynb *.md *.markdown *.mdx *.rst *.txt *.js *.jsx *.mjs *.cjs *.ts *.tsx *.mts *.go *.rs *.java "
    "*.kt *.scala *.c *.h *.cc *.cpp *.hpp *.cs *.rb *.php *.swift *.lua *.sh *.sql *.json *.yaml *.yml *.toml *.ini "
    "*.cfg *.html *.css Dockerfile Makefile "
    # Documents, extracted before chunking (sources/extract/)
    "*.pdf *.docx *.pptx *.xlsx *.csv *.tsv *.htm"
)
DEFAULT_EXCLUDE_DIRS = (
    ".git .hg .svn node_modules __pycache__ .venv venv env dist build .next .nuxt target .mypy_cache .pytest_cache "
    ".ruff_cache .tox .idea .vscode coverage htmlcov .cache vendor"
)


class WorkspaceRoot(Scoped):
    name = models.CharField(max_length=200, unique=True)
    path = models.CharField(
        max_length=1024, unique=True, help_text="Absolute directory, under one of RAG_ROOT_BASE_DIRS."
    )
    include_globs = models.TextField(
        default=DEFAULT_INCLUDE, help_text="File name patterns to index, separated by spaces."
    )
    exclude_dirs = models.TextField(default=DEFAULT_EXCLUDE_DIRS, help_text="Directory names never entered.")
    deny_patterns = models.TextField(
        default=DEFAULT_DENY,
        blank=True,
        help_text='Secret-bearing names never indexed, listed as skipped ("secret-bearing name"): .gitignore patterns '
        "separated by spaces, case-insensitive; a trailing / matches directories only. Empty: deny nothing.",
    )
    index_hidden = models.BooleanField(
        default=False,
        help_text="Index files and directories whose names start with a dot (the deny list still applies).",
    )
    scan_secrets = models.BooleanField(
        default=True,
        help_text="Skip files whose text holds an obvious key or token (private key header, AWS key id, "
        "GitHub, Slack, Stripe, Google or sk- API keys).",
    )
    hard_links_inside = models.BooleanField(
        default=False,
        verbose_name="allow hard links inside the root",
        help_text="Index a file with several hard links when every link is one of this root's files (checked by device "
        "and inode at each job). Off: every hard-linked file is skipped, since another link may sit outside "
        "the root (ln /etc/passwd docs/passwd.txt).",
    )
    max_file_bytes = models.PositiveIntegerField(default=500_000)
    embedding_model_name = models.CharField(
        max_length=255,
        blank=True,
        help_text="Empty: RAG_EMBEDDING_MODEL. A local model's name or path, or "
        "api:MODEL or api:MODEL@DIMENSIONS for the OpenAI-compatible API at RAG_LLM_BASE_URL.",
    )
    similarity_threshold = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Vector-only matches below this cosine similarity are dropped. Empty: RAG_SIMILARITY_THRESHOLD_FILE.",
    )
    enabled = models.BooleanField(default=True)
    cooldown_seconds = models.PositiveIntegerField(
        default=300, help_text="Minimum time between full re-verifies (force bypasses it)."
    )
    reverify_minutes = models.PositiveIntegerField(default=30, help_text="Periodic re-verify interval; 0 = off.")
    watch = models.BooleanField(
        default=True,
        help_text="Index a changed file within seconds: the watcher (RAG_WATCH) queues a job for just the changed "
        "paths. The periodic re-verify still catches what it misses.",
    )
    source = models.OneToOneField(
        Source,
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        help_text="The default segment: files no segment claims.",
    )
    last_verified_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Pinned when an admin saves the root (or by its first job): a path can later be made to lead elsewhere (a
    # symlink swapped in, the directory replaced), and then jobs, read, grep and the viewer refuse the root.
    # Text, not integers: st_ino is unsigned 64-bit (overlayfs sets its top bits), past PostgreSQL's bigint.
    directory_identity = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text='"device:inode" of the directory the path led to when it was pinned; empty: pinned by the next job.',
    )
    symlink_target = models.CharField(
        max_length=1024,
        blank=True,
        editable=False,
        help_text="Where the path led when an admin confirmed a path that passes through a symlink; empty: the path "
        "must pass through none.",
    )
    # A git root (sources/git_roots.py): the worker clones git_url into the data directory and indexes a checkout of
    # the branch's tip there; ``path`` is that checkout, set by the system.
    git_url = models.CharField(
        max_length=1024,
        blank=True,
        verbose_name="git URL",
        help_text="Empty: a directory root. https://, ssh:// (or user@host:path) or file:// for a local bare "
        "repository. No user name, password or token in an https URL: name a bound credential below.",
    )
    git_branch = models.CharField(max_length=255, blank=True, default="main", verbose_name="git branch")
    git_credential = models.CharField(
        max_length=64,
        blank=True,
        verbose_name="credential",
        help_text="The name of a credential the operator bound in RAG_GIT_CREDENTIALS_DIR (NAME.toml: its host, and "
        "its token or ssh key); it is sent only to the host it is bound to. Empty: none (a public repository).",
    )
    # Set by migration 0020 on a root whose credential was a file, a variable or a URL's user info (no longer
    # accepted): its jobs fail saying how to bind it, until an admin saves the root again.
    git_credential_legacy = models.CharField(max_length=1200, blank=True, editable=False)
    git_permalink = models.CharField(
        max_length=1024,
        blank=True,
        verbose_name="permalink template",
        help_text="A link a person can open for a hit, e.g. https://github.com/org/repo/blob/{commit}/{path}#L{start}"
        "-L{end}. Fields: {commit} {path} {start} {end}. Empty: no link.",
    )
    # The webhook's secret is derived from SECRET_KEY and this salt (sources/git_hooks.py): the database alone
    # never holds it, and a new salt rotates it.
    git_webhook_salt = models.CharField(max_length=64, blank=True, editable=False)
    git_commit = models.CharField(
        max_length=64, blank=True, editable=False, help_text="The last commit indexed in full (git roots)."
    )
    git_indexed_branch = models.CharField(max_length=255, blank=True, editable=False)
    git_error = models.TextField(blank=True, editable=False, help_text="Why the last fetch failed (redacted).")
    # A web root (sources/connectors/web/): the pages under this URL, crawled; ``path`` is the URL, set by the system.
    web_url = models.CharField(
        max_length=1024,
        blank=True,
        verbose_name="web site URL",
        help_text="Empty: not a web site. An http(s) start page (or a sitemap .xml): the pages under its directory "
        "on its host are crawled, robots.txt honoured, and cited by URL. Hosts on loopback or private addresses are "
        "refused unless RAG_WEB_ALLOW_PRIVATE.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_git(self) -> bool:
        return bool(self.git_url)

    @property
    def is_web(self) -> bool:
        return bool(self.web_url)


class Segment(models.Model):
    root = models.ForeignKey(WorkspaceRoot, on_delete=models.CASCADE, related_name="segments")
    name = models.CharField(max_length=200)
    path_glob = models.CharField(
        max_length=512, help_text='Files of the root this segment claims, e.g. "docs/**" or "src/api/*.py".'
    )
    embedding_model_name = models.CharField(
        max_length=255, blank=True, help_text="Empty: the root's model. Named as the root's is."
    )
    # Each model has its own similarity scale, so a segment with its own model may need its own cut-off.
    similarity_threshold = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(-1.0), MaxValueValidator(1.0)],
        help_text="Vector-only matches below this cosine similarity are dropped. Empty: the root's.",
    )
    channels = models.CharField(
        max_length=1024,
        blank=True,
        validators=[_scope_names],
        help_text="Channels allowed to see it, separated by spaces; empty = the root's.",
    )
    source = models.OneToOneField(Source, null=True, blank=True, editable=False, on_delete=models.SET_NULL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["root", "path_glob"], name="segment_unique_glob")]

    def __str__(self) -> str:
        return f"{self.root.name}: {self.name}"


class IndexedFile(models.Model):
    """What is stored for one file: unchanged stat and hash mean nothing to do."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="files")
    generation = models.PositiveIntegerField(default=0)
    path = models.CharField(max_length=1024)
    size = models.BigIntegerField()
    mtime_ns = models.BigIntegerField()
    # The connector's change marker where a stat is not one (sources/connectors/base.py ``Item.marker``).
    marker = models.TextField(blank=True, default="")
    content_hash = models.CharField(max_length=64)  # SHA-256 of the text read
    fingerprint = models.CharField(max_length=64, blank=True, default="")  # sources.ingest.fingerprint
    # The chunker identity that made it (sources.chunking.chunker_identity); "2" on rows from before per-strategy
    # versions (migration 0021). Informational: the fingerprint decides what is current.
    chunking_version = models.CharField(max_length=64)
    embedding_model = models.ForeignKey(EmbeddingModel, on_delete=models.PROTECT, related_name="+")
    chunk_count = models.PositiveIntegerField(default=0)
    indexed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "generation", "path"], name="indexed_file_unique")]


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_JOB_STATUSES = (JobStatus.QUEUED, JobStatus.RUNNING)


class IndexJob(models.Model):
    root = models.ForeignKey(WorkspaceRoot, on_delete=models.CASCADE, related_name="jobs")
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    force = models.BooleanField(default=False)
    trigger = models.CharField(max_length=32, default="admin")
    # Root-relative paths: a targeted job reads only these (a directory: what is below it), never walks the root.
    paths = models.JSONField(default=list, blank=True, help_text="Empty: the whole root.")
    attempt = models.PositiveIntegerField(default=1)
    message = models.TextField(blank=True)
    files_total = models.PositiveIntegerField(default=0)
    files_seen = models.PositiveIntegerField(default=0)
    files_changed = models.PositiveIntegerField(default=0)
    files_unchanged = models.PositiveIntegerField(default=0)
    files_skipped = models.PositiveIntegerField(default=0)
    files_failed = models.PositiveIntegerField(default=0)
    files_deleted = models.PositiveIntegerField(default=0)
    chunks_queued = models.PositiveIntegerField(
        default=0, help_text="Chunks this job embeds (embedded or waiting for their vectors)."
    )
    chunks_written = models.PositiveIntegerField(
        default=0, help_text="Chunks written so far: searchable by their words, with or without a vector yet."
    )
    chunks_embedded = models.PositiveIntegerField(default=0)
    chunks_deleted = models.PositiveIntegerField(default=0)
    chunks_undescribed = models.PositiveIntegerField(
        default=0,
        help_text=(
            "Chunks stored without their contextual description (the language model failed); the next run retries them."
        ),
    )
    errors = models.JSONField(default=list, blank=True, help_text="The first problems: [{path, reason}].")
    # Counted by reason without paths (sources/outcomes.py): every viewer of the job may read these.
    left_out = models.JSONField(
        default=dict,
        blank=True,
        help_text="What the walk left out without a line of its own, by reason: {reason: count}.",
    )
    skipped_by_reason = models.JSONField(default=dict, blank=True, help_text="Skipped files by kind of reason.")
    failed_by_reason = models.JSONField(default=dict, blank=True, help_text="Failed files by kind of reason.")
    # The progress model's state (sources/progress.py), saved by the worker at each heartbeat and read by every surface.
    phase = models.CharField(max_length=16, blank=True, help_text="listing, reading, embedding or finishing.")
    progress_mark = models.FloatField(default=0.0, help_text="The highest share done reached (0 to 1).")
    progress_samples = models.JSONField(
        default=list, blank=True, help_text="Recent [time, files seen, chunks embedded], for the rate."
    )
    worker = models.CharField(max_length=255, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One root is never indexed by two jobs at once; a second request
            # finds this one instead of starting another.
            models.UniqueConstraint(
                fields=["root"], condition=Q(status__in=["queued", "running"]), name="one_active_job_per_root"
            )
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.root}, {self.status})"

    @property
    def progress(self) -> float:
        """The share of the work done, as every surface shows it: the worker's high-water mark (sources/progress.py)."""
        if self.status == JobStatus.SUCCEEDED:
            return 1.0
        return self.progress_mark


class VectorBatch(models.Model):
    """A share of a job's chunks waiting for their vector, that any bulk worker process may claim and embed.

    The words-first stage writes chunks marked ``vector_pending``; the job
    then splits them into batches (sources/pipeline/vectors.py). Who embeds
    a batch holds its session advisory lock (sources/locks.py): a worker
    that dies loses the lock with its session, and the batch is claimed
    again. Its vectors are stored in the same transaction that marks it
    done, and only by the lock's holder, so a batch enters the index once.
    """

    job = models.ForeignKey(IndexJob, on_delete=models.CASCADE, related_name="vector_batches")
    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+")
    generation = models.PositiveIntegerField()
    model = models.ForeignKey(EmbeddingModel, on_delete=models.CASCADE, related_name="+")
    chunk_ids = ArrayField(models.BigIntegerField())
    worker = models.CharField(max_length=255, blank=True, help_text="The process that claimed it last (host:pid).")
    attempts = models.PositiveIntegerField(default=0, help_text="Claims so far: more than one after a takeover.")
    beat_at = models.DateTimeField(null=True, blank=True, help_text="Its worker's last sign of progress.")
    stored = models.PositiveIntegerField(default=0, help_text="Vectors stored when it was done.")
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["job", "done_at"], name="vector_batch_job_open")]

    def __str__(self) -> str:
        return f"vector batch {self.pk} of job {self.job_id}"
