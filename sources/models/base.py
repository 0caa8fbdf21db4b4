"""What every source shares: embedding models, sources, scope and index state."""

from django.contrib.postgres.fields import ArrayField
from django.core.validators import RegexValidator
from django.db import models

from sources.embedding import ModelSpec


class EmbeddingModel(models.Model):
    """A model's stable identity. Every chunk records the model that embedded it."""

    class Provider(models.TextChoices):
        LOCAL = "local", "Local (sentence-transformers)"
        API = "api", "OpenAI-compatible API (/embeddings)"

    provider = models.CharField(max_length=32, choices=Provider.choices, default=Provider.LOCAL)
    name = models.CharField(
        max_length=255, help_text="Model name or local path; an API model: MODEL or MODEL@DIMENSIONS."
    )
    dimensions = models.PositiveIntegerField()
    normalized = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "name", "dimensions", "normalized"], name="embedding_model_identity"
            )
        ]

    def __str__(self) -> str:
        return self.spec.identity

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec(provider=self.provider, name=self.name, dimensions=self.dimensions, normalized=self.normalized)

    @property
    def hnsw_index_name(self) -> str:
        return f"sources_chunk_hnsw_m{self.pk}"


class Source(models.Model):
    """What chunks belong to: a skill, a tool, or one segment of a workspace root.

    Scope and channel gating live here so one filter in SQL serves every
    channel: empty ``bot_id``/``client_id`` means shared with everyone, an
    empty ``channels`` list means every channel may see it. Searches read
    only ``active_generation``: a model change builds the next generation
    beside it and flips this number in one transaction.
    """

    class Kind(models.TextChoices):
        SKILL = "skill", "Skill"
        FILE = "file", "Workspace files"
        TOOL = "tool", "Tool"
        DATASET = "dataset", "Evaluation dataset"
        DOCUMENT = "document", "Uploaded document"
        MEMORY = "memory", "Memory"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    # A label for admin lists, logs and citations, written by sources.models.keys only (source_key,
    # unowned_source_key): code finds a source's owner by the keys (Skill.source, Tool.source, Segment.source,
    # WorkspaceRoot.source, root, UploadedDocument.source), never by it.
    key = models.CharField(
        max_length=512, unique=True, help_text="skill:SLUG, tool:KEY, root:ID, root:ID:segment:ID or document:ID"
    )
    title = models.CharField(max_length=255, blank=True)
    bot_id = models.CharField(max_length=128, blank=True, default="")
    client_id = models.CharField(max_length=128, blank=True, default="")
    channels = ArrayField(models.CharField(max_length=128), default=list, blank=True)
    enabled = models.BooleanField(default=True)
    # Not served from this moment on (a memory's expiry); checked by the scope rule at query time, so nothing has to
    # run at the moment it passes.
    expires_at = models.DateTimeField(null=True, blank=True)
    # Set from the root or segment; null: RAG_SIMILARITY_THRESHOLD_<KIND>.
    similarity_threshold = models.FloatField(null=True, blank=True)
    active_generation = models.PositiveIntegerField(default=0)
    embedding_model = models.ForeignKey(
        "EmbeddingModel",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The model of the active generation's vectors.",
    )
    # Every source of a root (its default segment and each segment's) points to it, so a root's sources are one
    # join, a root's deletion deletes them, and a segment's source still knows its root after the segment is gone.
    root = models.ForeignKey(
        "sources.WorkspaceRoot",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="sources",
        help_text="For workspace files: the root whose files these are.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(root__isnull=True) | models.Q(kind="file"), name="source_root_only_for_files"
            )
        ]

    def __str__(self) -> str:
        return self.key


# Names of bots, clients and channels: what callers' keys and grants are
# compared with, so no spaces (channels are separated by them), no NUL.
SCOPE_NAME = r"[A-Za-z0-9_.:@-]{1,128}"
_scope_name = RegexValidator(rf"^(?:{SCOPE_NAME})?$", "Use letters, digits and _ . : @ - only (at most 128).")
_scope_names = RegexValidator(
    r"^[A-Za-z0-9_.:@,\s-]*$", "Names separated by spaces or commas, of letters, digits and _ . : @ - only."
)


def words(value: str) -> list[str]:
    """Names typed in the admin (globs, directories, channels), separated by spaces or commas."""
    return [word for word in value.replace(",", " ").split() if word]


class Scoped(models.Model):
    """Who may see a skill, tool or root; copied to its Source rows on save.

    Searches read scope from the Source at query time, so a change here
    applies to every surface at once, without re-embedding.
    """

    bot_id = models.CharField(
        max_length=128,
        blank=True,
        default="",
        validators=[_scope_name],
        help_text="Empty: shared with every bot. Otherwise only callers acting for this bot see it.",
    )
    client_id = models.CharField(
        max_length=128,
        blank=True,
        default="",
        validators=[_scope_name],
        help_text="Empty: shared with every client. Otherwise only callers of this client see it.",
    )
    channels = models.CharField(
        max_length=1024,
        blank=True,
        default="",
        validators=[_scope_names],
        help_text="Channels allowed to see it, separated by spaces; empty = every channel.",
    )

    class Meta:
        abstract = True

    @property
    def scope_label(self) -> str:
        """Who can see it, for lists: "bot b1, channels ops" or "shared"."""
        named = (("bot", self.bot_id), ("client", self.client_id), ("channels", self.channels))
        return ", ".join(f"{name} {value}" for name, value in named if value) or "shared"

    @property
    def scope_fields(self) -> dict:
        """The Source columns this scope sets."""
        return {"bot_id": self.bot_id, "client_id": self.client_id, "channels": sorted(set(words(self.channels)))}


class IndexStatus(models.TextChoices):
    PENDING = "pending", "Not indexed yet"
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Indexing"
    INDEXED = "indexed", "Indexed"
    FAILED = "failed", "Failed"


class Indexed(models.Model):
    """Index state shared by skills and tools (one source each)."""

    source = models.OneToOneField(Source, null=True, blank=True, editable=False, on_delete=models.SET_NULL)
    index_status = models.CharField(
        max_length=16, choices=IndexStatus.choices, default=IndexStatus.PENDING, editable=False
    )
    content_hash = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="SHA-256 of the indexed text (sources.ingest.content_hash).",
    )
    fingerprint = models.CharField(
        max_length=64,
        blank=True,
        editable=False,
        help_text="What the stored chunks were made from (sources.ingest.fingerprint).",
    )
    indexed_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
