"""Indexing services: the writes behind admin, tasks and commands."""

import hashlib
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rag_site.errors import ApplicationError
from sources.chunking import CHUNKING_VERSION, ChunkResult, markdown_chunk
from sources.embedding import EmbeddingError
from sources.models import EmbeddingModel, IndexStatus, Skill, Source
from sources.store import FileChunks, embedding_model_for, files_embed, files_replace

log = logging.getLogger(__name__)


class IndexingError(ApplicationError):
    """Indexing a source failed for a reason worth showing to its owner."""


@dataclass(frozen=True, slots=True)
class IndexOutcome:
    skipped: bool
    chunks_embedded: int = 0
    chunks_deleted: int = 0


def skill_fingerprint(*, skill: Skill, model: EmbeddingModel) -> str:
    """Everything that changes the stored chunks: text, chunker, model, scope."""
    parts = [skill.body, skill.title, CHUNKING_VERSION, model.spec.identity, str(settings.RAG_CHUNK_MAX_CHARS)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def skill_fingerprint_forget(*, skill_id: int) -> None:
    """The next indexing of the skill re-embeds it, even if unchanged."""
    Skill.objects.filter(pk=skill_id).update(content_hash="")


def skill_index(*, skill_id: int, force: bool = False) -> IndexOutcome | None:
    """Chunk, embed and store one skill; a no-op when nothing changed.

    Returns None when the skill no longer exists (deleted after queueing).
    On failure the skill keeps its previous chunks and records the reason.
    """
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None:
        return None
    model = embedding_model_for()
    fingerprint = skill_fingerprint(skill=skill, model=model)
    # content_hash is written only on success, so equality means the stored
    # chunks already are this exact text, chunker and model.
    if not force and fingerprint == skill.content_hash:
        skill_source_sync(skill)
        Skill.objects.filter(pk=skill_id).update(index_status=IndexStatus.INDEXED, last_error="")
        return IndexOutcome(skipped=True)

    Skill.objects.filter(pk=skill_id).update(index_status=IndexStatus.RUNNING)
    if len(skill.body.encode()) > settings.RAG_MAX_SKILL_BYTES:
        raise IndexingError(f"the skill body is {len(skill.body.encode()):,} bytes; the limit is RAG_MAX_SKILL_BYTES={settings.RAG_MAX_SKILL_BYTES:,}")
    document = markdown_chunk(skill.body, max_chars=settings.RAG_CHUNK_MAX_CHARS)
    if document.front_matter.error:
        raise IndexingError(document.front_matter.error)
    return _skill_store(
        skill_id=skill_id, chunks=document.chunks, model=model, fingerprint=fingerprint, metadata=document.front_matter.data
    )


def _skill_store(*, skill_id, chunks, model, fingerprint, metadata) -> IndexOutcome | None:
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None:
        return None
    source = skill_source_sync(skill, title=_skill_title(skill, metadata, chunks))
    batch = [FileChunks(source=source, generation=source.active_generation, path="", chunks=chunks)]
    try:
        files_embed(batch, model=model)
    except EmbeddingError as exc:
        raise IndexingError(str(exc)) from exc
    with transaction.atomic():
        # The row lock serialises two workers indexing the same skill.
        if not Skill.objects.select_for_update().filter(pk=skill_id).exists():
            return None
        deleted = files_replace(batch, model=model, track_state=False)
        Source.objects.filter(pk=source.pk).update(embedding_model=model)
        Skill.objects.filter(pk=skill_id).update(
            content_hash=fingerprint, metadata=metadata, indexed_at=timezone.now(), index_status=IndexStatus.INDEXED, last_error=""
        )
    return IndexOutcome(skipped=False, chunks_embedded=len(chunks), chunks_deleted=deleted)


def skill_index_failed(*, skill_id: int, reason: str) -> None:
    Skill.objects.filter(pk=skill_id).update(index_status=IndexStatus.FAILED, last_error=reason[:2000])


def _skill_title(skill: Skill, metadata: dict, chunks: list[ChunkResult]) -> str:
    if skill.title:
        return skill.title
    for key in ("title", "name"):
        if isinstance(metadata.get(key), str) and metadata[key].strip():
            return metadata[key].strip()
    for chunk in chunks:
        if chunk.metadata.get("heading"):
            return chunk.metadata["heading"]
    return skill.slug


def skill_source_sync(skill: Skill, *, title: str | None = None) -> Source:
    """The skill's Source row, created when the skill is saved; enabled and scope follow the skill.

    Called on every save, so a new scope applies to search at once (no re-embedding).
    """
    source = skill.source
    if source is None:
        source, _ = Source.objects.get_or_create(key=f"skill:{skill.slug}", defaults={"kind": Source.Kind.SKILL})
        Skill.objects.filter(pk=skill.pk).update(source=source)
        skill.source = source
    changes = {"enabled": skill.enabled, "key": f"skill:{skill.slug}", **skill.scope_fields}
    if title is not None:
        changes["title"] = title
    # Always written: the caller's copy of the source may be stale, and scope must never be.
    Source.objects.filter(pk=source.pk).update(**changes)
    for field, value in changes.items():
        setattr(source, field, value)
    return source


def skill_delete_source(*, skill_id: int) -> None:
    """Deleting a skill deletes its source and, by cascade, its chunks.

    Reads the link from the database: the caller's instance may predate the
    first indexing, which sets it.
    """
    Source.objects.filter(skill__pk=skill_id).delete()
