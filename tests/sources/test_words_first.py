"""Words first, vectors behind: a root is searchable by its words before a single vector exists.

The embedding model here is a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/openai_server.py) that can be
made to fail: a job whose vectors cannot be computed has still written every file's chunks, which search finds by
their words at once; the next job embeds exactly the chunks that wait, reads no file again and re-embeds nothing done.
"""

import uuid

import numpy as np
import pytest

from kernel.llm import process_breaker
from retrieval.candidates import WAITING, Candidate, CandidateList, Channel, ChannelKind, fused
from retrieval.choices import FusionMethod
from retrieval.search import Mode, chunks_search
from sources.models import Chunk, IndexedFile, JobStatus, WorkspaceRoot
from tests.conftest import index_root
from tests.openai_server import http_error

pytestmark = pytest.mark.django_db

FILES = {
    "zebra.py": "def zebra_sorting_helper(stripes):\n    return sorted(stripes)\n",
    "docs/harbour.md": "# Harbour\n\nThe lantern at the harbour glows over the fjord.\n",
    "docs/glacier.md": "# Glacier\n\nA glacier meadow melts slowly every spring.\n",
}


@pytest.fixture
def api(settings, openai_server):
    settings.RAG_LLM_BASE_URL = openai_server.base_url
    settings.RAG_LLM_MAX_RETRIES = 0
    return openai_server


@pytest.fixture
def model_name(api) -> str:
    return f"embedder-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def root(tmp_path, settings, model_name):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    for name, text in FILES.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    return WorkspaceRoot.objects.create(
        name="repo",
        path=str(directory),
        cooldown_seconds=0,
        similarity_threshold=-1.0,
        embedding_model_name=f"api:{model_name}@256",
    )


def heal(api, model_name: str) -> None:
    """The endpoint answers again, and its model is no longer cooling down after the failures."""
    api.heal(model_name)
    process_breaker().close(model_name)


def chunks(root: WorkspaceRoot):
    return Chunk.objects.filter(source__key=f"root:{root.pk}")


def test_a_root_is_searchable_by_words_while_its_vectors_fail_and_the_next_job_embeds_only_what_waits(
    api, root, model_name
):
    api.fail_always(model_name, http_error(503))
    job = index_root(root)
    # The vectors stage failed and says why; everything before it is written.
    assert job.status == JobStatus.FAILED and f"embedding with api:{model_name}@256 failed" in job.message
    written = chunks(root).count()
    assert written and job.chunks_written == written and job.files_changed == 3
    assert chunks(root).filter(vector_pending=True, embedding__isnull=True).count() == written
    assert IndexedFile.objects.filter(source__key=f"root:{root.pk}").count() == 3

    by_words = chunks_search(query="zebra sorting helper", mode=Mode.LEXICAL)
    assert by_words[0].chunk.path == "zebra.py" and by_words[0].chunk.vector_pending
    hybrid = chunks_search(query="lantern harbour fjord", mode=Mode.HYBRID)
    assert hybrid[0].chunk.path == "docs/harbour.md", [(h.chunk.path, h.score, h.channels) for h in hybrid]
    assert any("wait for their vectors" in warning for warning in hybrid.warnings)

    heal(api, model_name)
    calls = api.count(model=model_name)
    again = index_root(root, force=False)
    assert again.status == JobStatus.SUCCEEDED, again.message
    # No file read again, and exactly the chunks that waited embedded.
    assert (again.files_unchanged, again.files_changed, again.chunks_written) == (3, 0, 0)
    assert again.chunks_queued == again.chunks_embedded == written
    assert api.count(model=model_name) > calls
    assert not chunks(root).filter(vector_pending=True).exists()
    assert not chunks(root).filter(embedding__isnull=True).exists()
    found = chunks_search(query="lantern harbour fjord", mode=Mode.VECTOR)
    assert found[0].chunk.path == "docs/harbour.md" and not found[0].chunk.vector_pending
    assert not any("wait for their vectors" in w for w in chunks_search(query="lantern harbour").warnings)


def test_an_edited_file_keeps_meaning_search_until_its_new_vectors_exist(api, root, model_name):
    assert index_root(root, force=False).status == JobStatus.SUCCEEDED
    old = {(c.path, c.chunk_index): np.array(c.embedding) for c in chunks(root)}

    api.script(model_name, http_error(503))  # the vectors stage's one call fails; the queries' embeddings do not
    harbour = root.path + "/docs/harbour.md"
    with open(harbour, "a") as f:
        f.write("Ferries leave the harbour at dawn.\n")
    failed = index_root(root, force=False)
    assert failed.status == JobStatus.FAILED and (failed.files_changed, failed.files_unchanged) == (1, 2)
    waiting = chunks(root).get(path="docs/harbour.md")
    assert "Ferries" in waiting.content and waiting.vector_pending
    # The new text is searchable by its words, and by the vector of the text it replaced until its own exists.
    assert np.allclose(waiting.embedding, old[("docs/harbour.md", 0)])
    assert chunks_search(query="ferries dawn", mode=Mode.LEXICAL)[0].chunk.pk == waiting.pk
    process_breaker().close(model_name)
    by_meaning = chunks_search(query="lantern harbour fjord", mode=Mode.VECTOR)
    assert by_meaning[0].chunk.pk == waiting.pk
    assert any("wait for their vectors" in warning for warning in by_meaning.warnings)

    heal(api, model_name)
    done = index_root(root, force=False)
    assert (done.status, done.files_changed, done.chunks_embedded) == (JobStatus.SUCCEEDED, 0, 1)
    waiting.refresh_from_db()
    assert not waiting.vector_pending and not np.allclose(waiting.embedding, old[("docs/harbour.md", 0)])
    untouched = {(c.path, c.chunk_index): np.array(c.embedding) for c in chunks(root).exclude(path="docs/harbour.md")}
    assert all(np.allclose(vector, old[key]) for key, vector in untouched.items())


def test_a_chunk_waiting_for_its_vector_ranks_by_its_words_on_the_fused_scale():
    lexical = CandidateList(
        Channel(ChannelKind.LEXICAL),
        (
            Candidate(chunk_id=1, rank=1, score=10.0, pending=True),
            Candidate(chunk_id=2, rank=2, score=5.0),
            Candidate(chunk_id=3, rank=3, score=2.0, pending=True),
        ),
    )
    vector = CandidateList(
        Channel(ChannelKind.VECTOR, 7),
        (Candidate(chunk_id=2, rank=1, score=0.8), Candidate(chunk_id=4, rank=2, score=0.6)),
    )
    order = fused([lexical, vector], method=FusionMethod.CONVEX, lexical_weight=0.5, rrf_k=60)
    scores = {item.chunk_id: item.score for item in order}
    # 1: the best words, and in place of a cosine the query's best one (0.8) times its share of the best words (1).
    assert scores[1] == pytest.approx(0.5 * 1.0 + 0.8 * 1.0)
    assert scores[2] == pytest.approx(0.5 * 0.5 + 0.8)
    assert scores[3] == pytest.approx(0.5 * 0.2 + 0.8 * 0.2)
    assert [item.chunk_id for item in order][:2] == [1, 2]
    rrf = [item.chunk_id for item in fused([lexical, vector], method=FusionMethod.RRF, lexical_weight=1.0, rrf_k=60)]
    assert rrf[0] == 1 and rrf.index(3) < rrf.index(4)
    assert WAITING.name == "vector:0"
