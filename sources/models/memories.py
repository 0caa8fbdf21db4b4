"""Memories: short facts a bot writes for later conversations, one source (and one chunk) each."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from sources.models.base import Indexed, Scoped


class MemoryStatus(models.TextChoices):
    """Whether a memory is served, and if not, why; ``Memory.status`` decides it from the row's fields."""

    ACTIVE = "active", "Active"
    PENDING = "pending", "Awaiting approval"
    SUPERSEDED = "superseded", "Superseded"
    EXPIRED = "expired", "Expired"


class Memory(Scoped, Indexed):
    """A fact a bot (an API key) or a person wrote, with where it came from.

    Never edited in place once served: a new fact supersedes it (``supersedes`` on the new row, ``superseded_at``
    on the old), so the history stays readable. Served (searched, recalled) only while approved, not superseded
    and not expired; its Source's ``enabled`` and ``expires_at`` carry that into the one scope rule.
    """

    text = models.TextField(help_text="The fact, in a sentence or a few.")
    # Provenance. The key by foreign key (an audit trail survives a revoked key; a deleted one leaves ``author``).
    api_key = models.ForeignKey(
        "access.ApiKey",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="memories",
        help_text="The API key that wrote it.",
    )
    author = models.CharField(max_length=200, blank=True, editable=False, help_text="Who wrote it, as named then.")
    conversation_id = models.CharField(
        max_length=200, blank=True, default="", help_text="The conversation or run it was learnt in."
    )
    citation = models.CharField(
        max_length=1000, blank=True, default="", help_text="Where the fact comes from (a citation, a URL)."
    )
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Not served after this; empty: never expires.")
    approved_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Empty: awaiting approval (RAG_MEMORY_REQUIRE_APPROVAL)."
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, editable=False, on_delete=models.SET_NULL, related_name="+"
    )
    supersedes = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="superseded_by",
        help_text="The memory this one replaced.",
    )
    superseded_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "memory"
        verbose_name_plural = "memories"
        indexes = [models.Index(fields=["bot_id", "client_id", "-created_at"], name="memory_scope_newest")]

    def __str__(self) -> str:
        return self.text if len(self.text) <= 60 else self.text[:59] + "…"

    @property
    def status(self) -> MemoryStatus:
        if self.superseded_at is not None:
            return MemoryStatus.SUPERSEDED
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return MemoryStatus.EXPIRED
        if self.approved_at is None:
            return MemoryStatus.PENDING
        return MemoryStatus.ACTIVE

    @property
    def served(self) -> bool:
        """Approved and not superseded (expiry is checked at query time, by the scope rule)."""
        return self.approved_at is not None and self.superseded_at is None


def memory_status_filter(status: str) -> Q:
    """``Memory.status`` as a filter, for lists (the API's ``status``, the admin's filter)."""
    now = timezone.now()
    live = Q(superseded_at__isnull=True)
    unexpired = Q(expires_at__isnull=True) | Q(expires_at__gt=now)
    return {
        MemoryStatus.SUPERSEDED: ~live,
        MemoryStatus.EXPIRED: live & ~unexpired,
        MemoryStatus.PENDING: live & unexpired & Q(approved_at__isnull=True),
        MemoryStatus.ACTIVE: live & unexpired & Q(approved_at__isnull=False),
    }[MemoryStatus(status)]
