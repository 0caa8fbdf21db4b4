"""Rerank by a hosted service (RAG_RERANK_BACKEND=api), against a local fake in the Cohere/Jina/Voyage/TEI shape:
a success reorders the fused head; a 500, a timeout or an answer that is not the documented JSON keeps the fused
order with a warning, and opens the breaker every process shares."""

from dataclasses import replace

import pytest

from kernel.llm import process_breaker
from retrieval.choices import RerankBackend
from retrieval.config import SearchConfig
from retrieval.search import chunks_search
from sources import services
from tests.factories import SkillFactory
from tests.openai_server import http_error, malformed, ok, slow

pytestmark = pytest.mark.django_db

MODEL = "rerank-fake-1"
BODIES = {
    "deploy": "# Deploy\n\nShip the containers with docker compose on the production host.\n",
    "backup": "# Backups\n\nRun pg_dump every night and keep the dumps for a month.\n",
    "restore": "# Restore\n\nRestore the last pg_dump when a deploy goes wrong.\n",
}
QUERY = "restore the pg_dump after a deploy"


@pytest.fixture
def api_search(settings, openai_server):
    for slug, body in BODIES.items():
        services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)
    settings.RAG_RERANK_BACKEND = RerankBackend.API
    settings.RAG_RERANK_API_URL = openai_server.base_url + "/rerank"
    settings.RAG_RERANK_API_MODEL = MODEL
    settings.RAG_RERANK_API_KEY = "rerank-secret"
    settings.RAG_RERANK_API_TIMEOUT = 1.0
    process_breaker().close(MODEL)  # the breaker lives in Redis: no other test's verdict carries over
    config = SearchConfig.from_settings()
    yield replace(config, rerank=replace(config.rerank, min_chars=0))
    process_breaker().close(MODEL)


def slugs(hits) -> list[str]:
    return [hit.chunk.source.key.removeprefix("skill:") for hit in hits]


# What the fake service thinks of each skill: the reverse of what fusion makes of QUERY, so a rerank shows.
RELEVANCE = {"# Deploy": 0.9, "# Backups": 0.5, "# Restore": 0.2}


def relevance(query: str, document: str) -> float:
    return next(score for heading, score in RELEVANCE.items() if document.startswith(heading))


@pytest.mark.parametrize("bare", [False, True], ids=["cohere-shape", "tei-bare-list"])
def test_the_service_reorders_the_fused_head(api_search, openai_server, bare):
    openai_server.rerank_bare = bare
    openai_server.on_rerank(relevance)
    fused = chunks_search(query=QUERY, config=api_search, rerank=False)

    hits = chunks_search(query=QUERY, config=api_search, rerank=True)

    assert slugs(fused) == ["restore", "backup", "deploy"]
    assert slugs(hits) == ["deploy", "backup", "restore"]
    assert [hit.rerank.rank for hit in hits] == [1, 2, 3]
    assert [hit.score for hit in hits] == [0.9, 0.5, 0.2]
    assert hits.warnings == []
    (call,) = openai_server.requests(model=MODEL)
    assert call.path == "rerank" and call.headers["Authorization"] == "Bearer rerank-secret"
    assert call.body["query"] == QUERY and call.body["top_n"] == len(call.body["documents"]) == len(fused)
    assert all(isinstance(text, str) for text in call.body["documents"])


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (http_error(500), f"{MODEL} server (HTTP 500"),
        (slow(3.0), f"{MODEL} timeout (no answer within 1 s)"),
        (malformed(), f"{MODEL} bad_response (HTTP 200 with a body that is not JSON)"),
        (ok(), None),  # scripted "ok" on the rerank route: a 200 answer, see below for a wrong shape
    ],
    ids=["http-500", "timeout", "not-json", "ok"],
)
def test_a_failing_service_keeps_the_fused_order_with_a_warning_and_opens_the_breaker(
    api_search, openai_server, reply, reason
):
    openai_server.on_rerank(relevance)
    fused = slugs(chunks_search(query=QUERY, config=api_search, rerank=False))
    openai_server.script(MODEL, reply)

    hits = chunks_search(query=QUERY, config=api_search, rerank=True)

    if reason is None:  # the control: the same route answers and reranks
        assert hits.warnings == [] and slugs(hits) == ["deploy", "backup", "restore"] != fused
        return
    assert slugs(hits) == fused
    assert hits.warnings[0].startswith("rerank skipped: the rerank service could not rerank")
    assert reason in hits.warnings[0]
    assert openai_server.count(model=MODEL) == 1  # one try: a person waits
    assert process_breaker().status(models=[MODEL])[0].state == "open"

    again = chunks_search(query=QUERY, config=api_search, rerank=True)

    assert slugs(again) == fused and "cooling down" in again.warnings[0]
    assert openai_server.count(model=MODEL) == 1  # the open breaker spared the service a call


def test_an_answer_in_another_shape_is_a_bad_response(api_search, openai_server, monkeypatch):
    from tests import openai_server as fake

    fused = slugs(chunks_search(query=QUERY, config=api_search, rerank=False))
    monkeypatch.setattr(fake, "_reranked", lambda *args, **kwargs: {"results": [{"index": 99, "relevance_score": 1}]})

    hits = chunks_search(query=QUERY, config=api_search, rerank=True)

    assert slugs(hits) == fused and "result indexes outside the" in hits.warnings[0]
