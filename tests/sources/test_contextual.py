"""Contextual retrieval: chunk descriptions from a real OpenAI-wire server, cached, embedded and indexed lexically."""

import importlib
import uuid

import pytest
from django.db import connection, migrations

from access.scope import Scope
from kernel.llm import process_breaker
from retrieval.search import Mode, chunks_search
from sources import services
from sources.chunking import ChunkResult
from sources.contextual import DOCUMENT_CHARS, DescriptionRequest, description_messages
from sources.ingest import IngestSettings, embed_text, fingerprint
from sources.models import (
    DESCRIPTION_KEY,
    Chunk,
    ChunkDescription,
    IndexedFile,
    IndexStatus,
    JobStatus,
    Skill,
    Source,
    WorkspaceRoot,
)
from tests.conftest import index_root
from tests.openai_server import http_error, slow

pytestmark = pytest.mark.django_db

# A word that only the descriptions hold: finding it proves they are indexed.
MARKER = "quokkaplanning"
FILES = {
    "billing.py": (
        'def invoice_total(lines):\n    """Sum the invoice lines."""\n    return sum(line.amount for line in lines)\n'
    ),
    "notes.md": "# Notes\n\n## Deploys\n\nShip on Tuesdays.\n\n## Rollbacks\n\nRevert the release tag.\n",
    "tool.go": "package main\n\n// Serve answers pings.\nfunc Serve() int {\n\treturn 1\n}\n",
}


def unique(name: str) -> str:
    """A model name no other test uses: the breaker in the suite's Redis keeps state per model."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def describe(model: str, body: dict) -> str:
    excerpt = body["messages"][-1]["content"].split("<excerpt>\n", 1)[1].split("\n</excerpt>", 1)[0]
    return f"This chunk is part of the {MARKER} handbook and begins with {excerpt.split()[0]!r}."


@pytest.fixture
def llm(settings, openai_server):
    """Contextual retrieval on, described by a fresh model of the fake server; the roots embed through it too (fast)."""
    model = unique("describer")
    settings.RAG_LLM_BASE_URL = openai_server.base_url
    settings.RAG_LLM_MODEL = model
    settings.RAG_LLM_MAX_RETRIES = 0
    settings.RAG_LLM_RETRY_INITIAL_WAIT = 0.0
    settings.RAG_CONTEXTUAL_RETRIEVAL = True
    settings.RAG_CONTEXTUAL_MODEL = model
    settings.RAG_CONTEXTUAL_CONCURRENCY = 3
    openai_server.on_chat(describe)
    openai_server.describer = model
    return openai_server


@pytest.fixture
def root(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    for name, text in FILES.items():
        (directory / name).write_text(text)
    return WorkspaceRoot.objects.create(
        name="repo",
        path=str(directory),
        cooldown_seconds=0,
        similarity_threshold=-1.0,
        embedding_model_name=f"api:{unique('embedder')}@32",
    )


def chunks_of(root: WorkspaceRoot) -> list[Chunk]:
    return list(Chunk.objects.filter(source__key__startswith=f"root:{root.pk}").order_by("path", "chunk_index"))


def descriptions_asked(server) -> int:
    return server.count(path="chat/completions")


def embedded_inputs(server) -> list[str]:
    return [text for call in server.requests(path="embeddings") for text in call.body["input"]]


# --- without a database -------------------------------------------------------------------


def test_the_description_comes_between_the_header_and_the_content_and_nothing_changes_without_one():
    chunk = ChunkResult(
        content="return 1", context_prefix="Guide > Setup", language="python", symbol="serve", start_line=1, end_line=1
    )
    assert embed_text(chunk, "a.py") == "a.py · serve · Guide > Setup\n\nreturn 1"
    described = ChunkResult(
        **{
            **{
                f: getattr(chunk, f)
                for f in ("content", "context_prefix", "language", "symbol", "start_line", "end_line")
            },
            "metadata": {DESCRIPTION_KEY: "This chunk serves."},
        }
    )
    assert embed_text(described, "a.py") == "a.py · serve · Guide > Setup\n\nThis chunk serves.\n\nreturn 1"
    assert embed_text(described) == "serve · Guide > Setup\n\nThis chunk serves.\n\nreturn 1"


def test_the_prompt_sends_a_bounded_start_of_the_document():
    request = DescriptionRequest(
        document_hash="h", path="big.txt", document="x" * (DOCUMENT_CHARS * 3), chunk="the chunk"
    )
    prompt = description_messages(request)[-1]["content"]
    assert (
        len(prompt) < DOCUMENT_CHARS + 200 and "the document continues" in prompt and "<excerpt>\nthe chunk\n" in prompt
    )


def test_turning_it_on_or_off_changes_every_fingerprint(settings):
    settings.RAG_CONTEXTUAL_RETRIEVAL = False
    off = IngestSettings.current()
    assert off.contextual == ""
    settings.RAG_LLM_BASE_URL, settings.RAG_CONTEXTUAL_RETRIEVAL, settings.RAG_CONTEXTUAL_MODEL = (
        "http://x/v1",
        True,
        "m1",
    )
    on = IngestSettings.current()
    settings.RAG_CONTEXTUAL_MODEL = "m2"
    other = IngestSettings.current()
    prints = {
        fingerprint(content="c", model="local:x:384:norm", config=c, chunker="window:1") for c in (off, on, other)
    }
    assert len(prints) == 3


# --- indexing ----------------------------------------------------------------------------


def test_each_chunk_is_described_once_stored_embedded_and_reused_across_reindex_and_model_switch(llm, root):
    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED, job.message
    stored = chunks_of(root)
    assert job.chunks_undescribed == 0 and "contextual" not in job.message
    assert descriptions_asked(llm) == len(stored) == ChunkDescription.objects.count()
    for chunk in stored:
        description = chunk.metadata[DESCRIPTION_KEY]
        assert description.startswith(
            f"This chunk is part of the {MARKER} handbook and begins with {chunk.content.split()[0]!r}"
        )
    # The embedded text is the header, then the description, then the content.
    inputs = embedded_inputs(llm)
    for chunk in stored:
        assert f"{chunk.metadata[DESCRIPTION_KEY]}\n\n{chunk.content}" in "\n---\n".join(inputs)

    forced = index_root(root, force=True)  # re-embeds every file: descriptions come from the cache
    assert forced.chunks_embedded == len(stored) and descriptions_asked(llm) == len(stored)
    unchanged = index_root(root, force=False)
    assert unchanged.files_unchanged == len(FILES) and unchanged.chunks_embedded == 0

    other = f"api:{unique('embedder')}@48"
    WorkspaceRoot.objects.filter(pk=root.pk).update(embedding_model_name=other)
    root.refresh_from_db()
    switched = index_root(root, force=False)
    assert switched.status == JobStatus.SUCCEEDED and switched.chunks_embedded == len(stored)
    assert descriptions_asked(llm) == len(stored)  # a model switch asks for nothing new
    assert {c.embedding_model.name for c in chunks_of(root)} == {other.removeprefix("api:")}
    assert all(c.metadata[DESCRIPTION_KEY] for c in chunks_of(root))


def test_a_word_only_in_the_descriptions_is_found_by_the_lexical_channel(llm, root, settings):
    scope = Scope(kinds=(Source.Kind.FILE,))
    index_root(root)
    hits = chunks_search(query=MARKER, mode=Mode.LEXICAL, scope=scope)
    assert {hit.chunk.pk for hit in hits} == {c.pk for c in chunks_of(root)}
    with connection.cursor() as cursor:  # the postings, kept by the triggers, hold the description's word
        cursor.execute(
            "SELECT count(DISTINCT chunk_id) FROM retrieval_posting "
            "WHERE lexeme = ANY(tsvector_to_array(to_tsvector('english', %s)))",
            [MARKER],
        )
        assert cursor.fetchone()[0] == len(chunks_of(root))

    settings.RAG_CONTEXTUAL_RETRIEVAL = False
    off = index_root(root, force=False)
    assert off.files_changed == len(FILES), "turning it off changes the fingerprint: every file is re-embedded"
    assert not any(DESCRIPTION_KEY in c.metadata for c in chunks_of(root))
    assert not chunks_search(query=MARKER, mode=Mode.LEXICAL, scope=scope)

    settings.RAG_CONTEXTUAL_RETRIEVAL = True
    asked = descriptions_asked(llm)
    on = index_root(root, force=False)
    assert on.files_changed == len(FILES) and descriptions_asked(llm) == asked  # back on: all from the cache
    assert len(chunks_search(query=MARKER, mode=Mode.LEXICAL, scope=scope)) == len(chunks_of(root))


def test_without_a_description_every_tsvector_is_exactly_the_one_before_descriptions_existed(db):
    source = Source.objects.create(kind=Source.Kind.FILE, key="plain", title="plain")
    fields = {"source": source, "start_line": 1, "end_line": 2, "content_hash": "h", "chunking_version": "t"}
    plain = Chunk.objects.create(
        path="src/RetryLoop.py",
        chunk_index=0,
        symbol="RetryLoop.run_once",
        context_prefix="Client > Retries",
        content="def run_once(self):\n    return backoff_wait()",
        metadata={"heading": "Retries"},
        **fields,
    )
    described = Chunk.objects.create(
        path="src/RetryLoop.py",
        chunk_index=1,
        content="return 1",
        metadata={DESCRIPTION_KEY: "This chunk ends the UploadClient retry loop."},
        **fields,
    )
    # The expression of migration 0003, the last one before descriptions.
    before = importlib.import_module("sources.migrations.0003_chunk_body_identifier_words")
    old = next(
        op.field.expression
        for op in before.Migration.operations
        if isinstance(op, migrations.AddField) and op.name == "search_vector"
    )
    rows = dict(Chunk.objects.annotate(old=old).values_list("pk", "old"))
    current = dict(Chunk.objects.values_list("pk", "search_vector"))
    assert current[plain.pk] == rows[plain.pk]
    assert current[described.pk] != rows[described.pk]
    assert "'upload':" in current[described.pk] and "'uploadcli" not in current[described.pk]  # identifiers split
    assert all(
        position.endswith("C")
        for term in current[described.pk].split(" ")
        for position in term.split(":")[1].split(",")
        if "upload" in term
    )


def test_a_failing_provider_leaves_chunks_undescribed_and_the_next_run_describes_them(llm, root):
    llm.fail_always(llm.describer, http_error(500))
    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED, job.message
    stored = chunks_of(root)
    assert stored and job.chunks_undescribed == len(stored) and job.chunks_embedded == len(stored)
    assert f"{len(stored)} chunks without a contextual description" in job.message
    assert not any(DESCRIPTION_KEY in c.metadata for c in stored)
    assert set(IndexedFile.objects.filter(source__key=f"root:{root.pk}").values_list("fingerprint", flat=True)) == {""}
    assert not ChunkDescription.objects.exists()

    llm.heal(llm.describer)
    process_breaker().close(llm.describer)
    healed = index_root(root, force=False)
    assert healed.status == JobStatus.SUCCEEDED and healed.chunks_undescribed == 0
    assert healed.files_changed == len(FILES), "undescribed files are not taken as current"
    assert all(c.metadata[DESCRIPTION_KEY] for c in chunks_of(root))
    assert index_root(root, force=False).files_unchanged == len(FILES)


def test_timeouts_degrade_the_same_way(llm, root, settings):
    settings.RAG_LLM_TIMEOUT = 0.2
    llm.fail_always(llm.describer, slow(2.0))
    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.chunks_undescribed == len(chunks_of(root)) > 0


def test_a_retried_timeout_still_gets_its_description(llm, root, settings):
    settings.RAG_LLM_TIMEOUT, settings.RAG_LLM_MAX_RETRIES, settings.RAG_CONTEXTUAL_CONCURRENCY = 0.3, 1, 1
    llm.script(llm.describer, slow(2.0))
    job = index_root(root)
    assert job.chunks_undescribed == 0 and all(c.metadata[DESCRIPTION_KEY] for c in chunks_of(root))
    assert descriptions_asked(llm) == len(chunks_of(root)) + 1


def test_a_skill_is_described_and_notes_descriptions_it_could_not_get(llm, settings):
    settings.RAG_EMBEDDING_MODEL = f"api:{unique('embedder')}@16"
    body = "# Deploying\n\n## Staging\n\nPush the tag.\n\n## Production\n\nAsk the on-call first.\n"
    llm.fail_always(llm.describer, http_error(503))
    skill = Skill.objects.create(slug="deploying", body=body)
    services.skill_index(skill_id=skill.pk)
    skill.refresh_from_db()
    assert skill.index_status == IndexStatus.INDEXED and skill.fingerprint == ""
    assert "have no contextual description" in skill.last_error

    llm.heal(llm.describer)
    process_breaker().close(llm.describer)
    outcome = services.skill_index(skill_id=skill.pk)
    skill.refresh_from_db()
    assert not outcome.skipped and skill.last_error == "" and skill.fingerprint
    assert all(c.metadata[DESCRIPTION_KEY].startswith("This chunk") for c in Chunk.objects.filter(source=skill.source))
    assert services.skill_index(skill_id=skill.pk).skipped
