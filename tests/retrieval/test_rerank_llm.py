"""The language model as the reranker: it names the passages to keep, best first; any failure keeps the fused order."""

import re
from dataclasses import replace

import pytest

from kernel.llm import process_breaker
from retrieval.choices import RerankBackend
from retrieval.config import SearchConfig
from retrieval.rerank_llm import ranking_parse
from retrieval.search import chunks_search
from sources import services
from tests.factories import SkillFactory
from tests.openai_server import http_error


@pytest.mark.unit
@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('{"ranking": [3, 1]}', [3, 1]),
        ('Sure! Here is the ranking:\n```json\n{"ranking": [2, "4", 2, 9]}\n```\nHope it helps.', [2, 4]),
        ("[1, 3, 2]", [1, 3, 2]),
        ('{"order": [4]}', [4]),
        ('{"ranking": []}', []),
        ("I cannot tell which passages help.", None),
        ('{"ranking": "first"}', None),
    ],
)
def test_the_ranking_is_read_from_any_json_list_in_the_answer(answer, expected):
    assert ranking_parse(answer, count=4) == expected


BODIES = {
    "deploy": "# Deploy\n\nShip the containers with docker compose on the production host.\n",
    "backup": "# Backups\n\nRun pg_dump every night and keep the dumps for a month.\n",
    "restore": "# Restore\n\nRestore the last pg_dump when a deploy goes wrong.\n",
}


@pytest.fixture
def llm_search(settings, openai_server):
    for slug, body in BODIES.items():
        services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)
    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "ranker"
    process_breaker().close("ranker")  # the breaker lives in Redis: no other test's verdict carries over
    config = SearchConfig.from_settings()
    return replace(config, rerank=replace(config.rerank, backend=RerankBackend.LLM, min_chars=0, llm_passage_chars=200))


def slugs(hits) -> list[str]:
    return [hit.chunk.source.key.removeprefix("skill:") for hit in hits]


@pytest.mark.django_db
def test_the_model_orders_and_filters_the_fused_head(llm_search, openai_server):
    asked = []

    def rank(model: str, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        asked.append(prompt)
        numbers = {
            slug: re.search(rf"\[(\d+)\] # {slug.title()}", prompt, re.IGNORECASE) for slug in ("restore", "backup")
        }
        return f'Ranking: {{"ranking": [{numbers["restore"].group(1)}, {numbers["backup"].group(1)}]}}'

    openai_server.on_chat(rank)
    hits = chunks_search(query="how do I get last night's database back", config=llm_search, rerank=True)
    assert slugs(hits) == ["restore", "backup"]  # deploy left out by the model
    assert [hit.rerank.rank for hit in hits] == [1, 2] and hits[0].score == 1.0
    assert hits.warnings == []
    assert len(asked) == 1 and "Query: how do I get last night's database back" in asked[0]


@pytest.mark.django_db
def test_a_failing_or_unreadable_model_keeps_the_fused_order_with_a_warning(llm_search, openai_server):
    fused = slugs(chunks_search(query="pg_dump restore", config=llm_search, rerank=False))
    openai_server.fail_always("ranker", http_error(500))
    hits = chunks_search(query="pg_dump restore", config=llm_search, rerank=True)
    assert slugs(hits) == fused and "rerank skipped: the language model could not rerank" in hits.warnings[0]
    assert openai_server.count(model="ranker") == 1  # one try at query time: no retries while a person waits
    assert process_breaker().status(models=["ranker"])[0].state == "open"  # skipped by every process for a while
    openai_server.heal()
    process_breaker().close("ranker")
    openai_server.on_chat(lambda model, body: "These all look relevant to me.")
    hits = chunks_search(query="pg_dump restore", config=llm_search, rerank=True)
    assert slugs(hits) == fused and "had no ranking" in hits.warnings[0]
