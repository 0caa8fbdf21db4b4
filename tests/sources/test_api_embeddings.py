"""Embeddings from an OpenAI-compatible /embeddings endpoint (a real fake server), per root, segment and skill."""

import uuid
from pathlib import Path

import numpy as np
import pytest
from django.db import connection

from access.scope import Scope
from retrieval.search import Mode, chunks_search
from sources import services
from sources.embedding import EmbeddingError, embedder_for, model_reference
from sources.embedding.api import api_name_parse
from sources.health import health_check
from sources.models import Chunk, EmbeddingModel, IndexStatus, JobStatus, Segment, Skill, Source, WorkspaceRoot
from tests import openai_server as fake
from tests.conftest import index_root
from tests.openai_server import http_error

pytestmark = pytest.mark.django_db

FILES = {
    "zebra.py": "def zebra_sorting_helper(stripes):\n    return sorted(stripes)\n",
    "docs/harbour.md": "# Harbour\n\nThe lantern at the harbour glows over the fjord.\n",
    "docs/glacier.md": "# Glacier\n\nA glacier meadow melts slowly every spring.\n",
}


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def api(settings, openai_server):
    settings.RAG_LLM_BASE_URL = openai_server.base_url
    settings.RAG_LLM_MAX_RETRIES = 0
    settings.RAG_EMBED_BATCH_SIZE = 2
    return openai_server


@pytest.fixture
def root(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    for name, text in FILES.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=0, similarity_threshold=-1.0)


def hnsw_index_exists(model: EmbeddingModel) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [model.hnsw_index_name])
        row = cursor.fetchone()
    return row is not None and f"halfvec({model.dimensions})" in row[0] and f"embedding_model_id = {model.pk}" in row[0]


def test_model_names_pick_the_provider_and_the_dimensions():
    assert model_reference("all-MiniLM-L6-v2") == ("local", "all-MiniLM-L6-v2")
    assert model_reference("/models/e5") == ("local", "/models/e5")
    assert model_reference("api:text-embedding-3-small@256") == ("api", "text-embedding-3-small@256")
    assert api_name_parse("text-embedding-3-small@256") == ("text-embedding-3-small", 256)
    assert api_name_parse("nomic-embed-text") == ("nomic-embed-text", None)
    assert api_name_parse("org/model@v2") == ("org/model@v2", None)  # not a size: part of the name
    with pytest.raises(EmbeddingError, match="names no model"):
        api_name_parse("@64")


def test_a_root_embeds_through_the_api_in_batches_and_is_searched_with_its_model(api, root, settings):
    name = unique("embedder")
    WorkspaceRoot.objects.filter(pk=root.pk).update(embedding_model_name=f"api:{name}@32")
    root.refresh_from_db()
    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED, job.message
    model = EmbeddingModel.objects.get(provider="api", name=f"{name}@32")
    assert (model.dimensions, model.normalized) == (32, True)
    chunks = list(Chunk.objects.filter(source__key=f"root:{root.pk}"))
    assert chunks and {c.embedding_model_id for c in chunks} == {model.pk}
    assert Source.objects.get(key=f"root:{root.pk}").embedding_model_id == model.pk
    assert hnsw_index_exists(model)
    calls = api.requests(path="embeddings", model=name)
    assert all(
        call.body["dimensions"] == 32 and len(call.body["input"]) <= settings.RAG_EMBED_BATCH_SIZE for call in calls
    )
    assert sum(len(call.body["input"]) for call in calls) == len(chunks)
    for chunk in chunks:
        assert len(chunk.embedding) == 32 and abs(np.linalg.norm(chunk.embedding) - 1.0) < 1e-5

    scope = Scope(kinds=(Source.Kind.FILE,))
    hits = chunks_search(query="zebra sorting helper stripes", mode=Mode.VECTOR, scope=scope)
    assert hits[0].chunk.path == "zebra.py"
    assert api.requests(path="embeddings", model=name)[-1].body["input"] == ["zebra sorting helper stripes"]
    hits = chunks_search(query="lantern harbour fjord", mode=Mode.HYBRID, scope=scope)
    assert hits[0].chunk.path == "docs/harbour.md"


def test_a_model_without_stated_dimensions_learns_them_and_a_segment_can_use_another(api, root):
    root_model, segment_model = unique("embedder"), unique("embedder")
    WorkspaceRoot.objects.filter(pk=root.pk).update(embedding_model_name=f"api:{root_model}")
    Segment.objects.create(root=root, name="docs", path_glob="docs/**", embedding_model_name=f"api:{segment_model}@24")
    root.refresh_from_db()
    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED, job.message
    learned = EmbeddingModel.objects.get(provider="api", name=root_model)
    assert learned.dimensions == fake.DEFAULT_DIMENSIONS
    assert "dimensions" not in api.requests(path="embeddings", model=root_model)[0].body
    segment = Segment.objects.get(root=root)
    by_model = {c.path: c.embedding_model.name for c in Chunk.objects.filter(source__key__startswith=f"root:{root.pk}")}
    assert by_model == {
        "zebra.py": root_model,
        "docs/harbour.md": f"{segment_model}@24",
        "docs/glacier.md": f"{segment_model}@24",
    }
    assert segment.source.embedding_model.dimensions == 24


def test_vectors_of_another_size_than_the_model_are_refused_with_a_clear_error(api, root, monkeypatch):
    name = unique("embedder")
    WorkspaceRoot.objects.filter(pk=root.pk).update(embedding_model_name=f"api:{name}")
    root.refresh_from_db()
    assert index_root(root).status == JobStatus.SUCCEEDED
    before = set(Chunk.objects.filter(source__key=f"root:{root.pk}").values_list("pk", flat=True))

    monkeypatch.setattr(fake, "DEFAULT_DIMENSIONS", 48)  # the endpoint now serves another model under the name
    (Path(root.path) / "zebra.py").write_text("def zebra_sorting_helper(stripes):\n    return list(stripes)\n")
    job = index_root(root, force=False)
    assert job.status == JobStatus.FAILED
    assert f"api:{name} answered with 48-dimensional vectors, but the model has 64 dimensions" in job.message
    # Nothing of another size was stored: the edited file's new text is searchable by its words and keeps its
    # former 64-dimensional vector, waiting for one of its own; the other files are the rows they were.
    rows = Chunk.objects.filter(source__key=f"root:{root.pk}")
    assert {len(c.embedding) for c in rows} == {64}
    edited = rows.get(path="zebra.py")
    assert "list(stripes)" in edited.content and edited.vector_pending
    assert set(rows.exclude(path="zebra.py").values_list("pk", flat=True)) < before

    with pytest.raises(EmbeddingError, match="48-dimensional"):
        embedder_for(provider="api", name=name).embed(["a query"])


def test_an_unreachable_endpoint_fails_the_job_with_the_reason(api, root):
    name = unique("embedder")
    api.fail_always(name, http_error(503))
    WorkspaceRoot.objects.filter(pk=root.pk).update(embedding_model_name=f"api:{name}@16")
    root.refresh_from_db()
    job = index_root(root)
    assert job.status == JobStatus.FAILED
    assert f"embedding with api:{name}@16 failed" in job.message and "server" in job.message


def test_skills_and_tools_follow_an_api_default_model(api, settings):
    name = unique("embedder")
    settings.RAG_EMBEDDING_MODEL = f"api:{name}@16"
    skill = Skill.objects.create(slug="ferries", body="# Ferries\n\nThe ferry leaves the harbour at dawn.\n")
    services.skill_index(skill_id=skill.pk)
    skill.refresh_from_db()
    assert skill.index_status == IndexStatus.INDEXED, skill.last_error
    assert {c.embedding_model.name for c in Chunk.objects.filter(source=skill.source)} == {f"{name}@16"}
    hits = chunks_search(query="ferry dawn", mode=Mode.VECTOR, scope=Scope(kinds=(Source.Kind.SKILL,)))
    assert hits and hits[0].chunk.source_id == skill.source_id
    checks = health_check().checks
    assert checks["embedding_model"].ok and checks["embedding_model"].details["name"] == settings.RAG_EMBEDDING_MODEL
