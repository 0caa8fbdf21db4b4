"""Issue 40 item 3: upgrading to per-strategy chunker versions (migration 0021) re-embeds nothing that was current."""

import hashlib

import pytest

from sources import services, tools, uploads
from sources.chunking import chunker_identity, strategy_identity
from sources.config import ingest_settings
from sources.extract import extractor_for
from sources.ingest import fingerprint
from sources.memories import memory_index
from sources.models import Chunk, IndexedFile, Memory, Skill, Tool, UploadedDocument, WorkspaceRoot
from tests.conftest import index_root
from tests.factories import SkillFactory
from tests.migrating import migrate

BEFORE = [("sources", "0020_git_credential_bindings")]
AFTER = [("sources", "0021_chunker_versions")]


def old_fingerprint(*, content: str, model: str, extractor: str = "") -> str:
    """sources.ingest.fingerprint before 0021: one global chunker version ("2") and both chunk settings, always."""
    config = ingest_settings()
    parts = [content, "2", str(config.max_chars), str(config.overlap), config.long_texts, config.contextual, model]
    if extractor:
        parts.append(extractor)
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


@pytest.fixture
def latest_schema_after():
    yield
    migrate()


@pytest.mark.django_db(transaction=True)
def test_fingerprints_of_the_old_formula_are_renewed_and_the_next_run_embeds_nothing(
    latest_schema_after, tmp_path, settings
):
    # Indexed as before the upgrade: the live code writes the rows (at today's schema, which it needs), each
    # fingerprint and chunking version is set to what the code before 0021 stored, and the schema goes back to 0020.
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    (directory / "guide.md").write_text("# Guide\n\nHow to deploy.\n")
    (directory / "app.py").write_text("def handler():\n    return 'billing'\n")
    (directory / "todo.txt").write_text("Renew the certificate.\n")
    (directory / "prices.csv").write_text("item,price\ntea,3\n")
    (directory / "stale.md").write_text("# Stale\n\nIndexed from other settings.\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=0)
    assert index_root(root).files_changed == 5
    skill = SkillFactory(body="# Deploy\n\nShip it.\n")
    services.skill_index(skill_id=skill.pk)
    tool = Tool.objects.create(name="get_weather", description="Current weather.")
    tools.tool_index(tool_id=tool.pk)
    memory = Memory.objects.create(text="Backups run at night.")
    memory_index(memory_id=memory.pk)
    notes = uploads.document_upload(uploads.Upload("notes.md", b"# Notes\n\nThe rota.\n"), max_bytes=1 << 20).document
    table = uploads.document_upload(uploads.Upload("table.csv", b"a,b\n1,2\n"), max_bytes=1 << 20).document
    for document in (notes, table):
        uploads.document_index(document_id=document.pk)

    for state in IndexedFile.objects.select_related("embedding_model"):
        extractor = extractor_for(state.path)
        old = old_fingerprint(
            content=state.content_hash,
            model=state.embedding_model.spec.identity,
            extractor=extractor.identity if extractor else "",
        )
        if state.path == "stale.md":  # stale already: RAG_CHUNK_MAX_CHARS was another when it was indexed
            old = hashlib.sha256(b"another formula's fingerprint").hexdigest()
        IndexedFile.objects.filter(pk=state.pk).update(fingerprint=old, chunking_version="2")
    for item_model in (Skill, Tool, Memory, UploadedDocument):
        for item in item_model.objects.select_related("source__embedding_model"):
            model = item.source.embedding_model.spec.identity
            if item_model is UploadedDocument:
                extractor = extractor_for(item.name)
                old = old_fingerprint(
                    content=item.file_sha256, model=model, extractor=extractor.identity if extractor else ""
                )
            else:
                old = old_fingerprint(content=item.content_hash, model=model)
            item_model.objects.filter(pk=item.pk).update(fingerprint=old)
    Chunk.objects.update(chunking_version="2")
    chunks = set(Chunk.objects.values_list("pk", flat=True))

    migrate(BEFORE)
    migrate(AFTER)
    migrate()

    config = ingest_settings()
    for state in IndexedFile.objects.select_related("embedding_model").exclude(path="stale.md"):
        extractor = extractor_for(state.path)
        assert state.fingerprint == fingerprint(
            content=state.content_hash,
            model=state.embedding_model.spec.identity,
            config=config,
            chunker=chunker_identity(state.path, document=extractor is not None),
            extractor=extractor.identity if extractor else "",
        ), state.path
    job = index_root(WorkspaceRoot.objects.get(pk=root.pk), force=False)
    assert (job.files_unchanged, job.files_changed, job.chunks_embedded) == (4, 1, 1)  # only the stale file
    assert services.skill_index(skill_id=skill.pk).skipped
    assert tools.tool_index(tool_id=tool.pk).skipped
    assert memory_index(memory_id=memory.pk).skipped
    assert uploads.document_index(document_id=notes.pk).skipped
    assert uploads.document_index(document_id=table.pk).skipped
    stale = set(Chunk.objects.filter(path="stale.md").values_list("pk", flat=True))
    assert set(Chunk.objects.values_list("pk", flat=True)) - stale <= chunks  # nothing else was embedded again
    skill.refresh_from_db()
    assert skill.fingerprint == fingerprint(
        content=skill.content_hash,
        model=Skill.objects.get(pk=skill.pk).source.embedding_model.spec.identity,
        config=config,
        chunker=strategy_identity("skill"),
    )
