"""Indexing services: the writes behind admin, tasks and commands."""

import logging

from sources import ingest
from sources.chunking import ChunkResult, markdown_chunk, strategy_identity
from sources.config import IndexingConfig, indexing_config
from sources.ingest import IndexingError, IndexOutcome, content_hash, embedding_model_for, fingerprint
from sources.models import Skill, Source, source_key

log = logging.getLogger(__name__)


def skill_fingerprint_forget(*, skill_id: int) -> None:
    """The next indexing of the skill re-embeds it, even if unchanged."""
    Skill.objects.filter(pk=skill_id).update(fingerprint="")


def skill_index(*, skill_id: int, force: bool = False, config: IndexingConfig | None = None) -> IndexOutcome | None:
    """Chunk, embed and store one skill; a no-op when its fingerprint is unchanged.

    Returns None when the skill no longer exists (deleted after queueing).
    On failure the skill keeps its previous chunks and records the reason.
    Its title and metadata follow the text on every run: they are not in
    the chunks, so changing them never re-embeds. ``config``: built by the
    caller (a task, the admin), else from the settings now.
    """
    config = config or indexing_config()
    skill = Skill.objects.filter(pk=skill_id).first()
    if skill is None:
        return None
    size = len(skill.body.encode("utf-8", "surrogatepass"))
    if size > config.max_skill_bytes:
        raise IndexingError(
            f"the skill body is {size:,} bytes; the limit is RAG_MAX_SKILL_BYTES={config.max_skill_bytes:,}"
        )
    parsed = markdown_chunk(skill.body, max_chars=config.ingest.max_chars)
    if parsed.front_matter.error:
        raise IndexingError(parsed.front_matter.error)
    metadata = parsed.front_matter.data
    source = skill_source_sync(skill, title=_skill_title(skill, metadata, parsed.chunks))
    model = embedding_model_for(config=config.embedding)
    digest = content_hash(skill.body)
    chunker = strategy_identity("skill")  # markdown at its own overlap: RAG_CHUNK_OVERLAP is not in the fingerprint
    document = ingest.Document(
        source=source,
        generation=source.active_generation,
        path="",
        chunks=parsed.chunks,
        model=model,
        chunker=chunker,
        content_hash=digest,
        fingerprint=fingerprint(content=digest, model=model.spec.identity, config=config.ingest, chunker=chunker),
        text=skill.body,
    )
    # The fingerprint is written only on success: equality means the stored
    # chunks already are this exact text, chunker and model.
    if not force and document.fingerprint == skill.fingerprint:
        Skill.objects.filter(pk=skill_id).update(metadata=metadata)
        ingest.item_unchanged(Skill, skill_id)
        return IndexOutcome(skipped=True)
    ingest.item_running(Skill, skill_id)
    deleted = ingest.item_store(Skill, skill_id, document, config=config, metadata=metadata)
    if deleted is None:
        return None
    return IndexOutcome(skipped=False, chunks_embedded=len(document.chunks), chunks_deleted=deleted)


def skill_index_failed(*, skill_id: int, reason: str) -> None:
    ingest.item_failed(Skill, skill_id, reason)


def _skill_title(skill: Skill, metadata: dict, chunks: list[ChunkResult]) -> str:
    if skill.title:
        return skill.title
    for key in ("title", "name"):
        if isinstance(metadata.get(key), str) and metadata[key].strip():
            return metadata[key].strip()
    # The first chunk's heading path starts at the text's top heading: "# Deploy" followed at once by "## Rollback"
    # is one chunk whose own heading is "Rollback", and the skill is "Deploy".
    for chunk in chunks:
        top = chunk.context_prefix.split(" > ")[0].lstrip("#").strip()
        if top or chunk.metadata.get("heading"):
            return top or chunk.metadata["heading"]
    return skill.slug


def skill_source_sync(skill: Skill, *, title: str | None = None) -> Source:
    """The skill's Source row, created when the skill is saved; enabled and scope follow the skill.

    Called on every save, so a new scope applies to search at once (no re-embedding).
    """
    source = skill.source
    if source is None:
        source, _ = Source.objects.get_or_create(key=source_key(skill), defaults={"kind": Source.Kind.SKILL})
        Skill.objects.filter(pk=skill.pk).update(source=source)
        skill.source = source
    changes = {"enabled": skill.enabled, "key": source_key(skill), **skill.scope_fields}
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


def skill_preview(body: str, *, config: IndexingConfig | None = None) -> dict:
    """How ``body`` would be chunked now (no embedding, nothing stored): for the admin's preview."""
    config = config or indexing_config()
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > config.max_skill_bytes:
        return {"error": f"The body is {size:,} bytes; the limit is RAG_MAX_SKILL_BYTES={config.max_skill_bytes:,}."}
    max_chars = config.ingest.max_chars
    parsed = markdown_chunk(body, max_chars=max_chars)
    if parsed.front_matter.error:
        return {"error": parsed.front_matter.error}
    return {"chunks": parsed.chunks, "metadata": parsed.front_matter.data, "max_chars": max_chars}
