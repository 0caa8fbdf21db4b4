"""The LangChain and LlamaIndex retrievers of docs/agents.md, run as written against a real (threaded WSGI) server.

The fenced blocks are read from the page and executed, only the server's URL
and the key put in place of the placeholders, so the page is what is tested.
Real PostgreSQL, Redis and embedding model; no part of the server is mocked.
"""

import json
import re
import urllib.error
from pathlib import Path

import pytest

from access.keys import api_key_create
from sources import services
from sources.models import JobStatus, WorkspaceRoot
from tests.conftest import api_client, index_root
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
SECTION = "## Retrievers for LangChain and LlamaIndex"
PLACEHOLDER_URL, PLACEHOLDER_KEY = "http://127.0.0.1:8000", "rag_..."
QUERY, K = "how do I back up the database", 5  # what the page's blocks search for
SKILL = "# Deploy\n\nShip it with docker compose.\n\n## Backups\n\nBack up the database with pg_dump every night.\n"


def blocks() -> list[str]:
    """The section's python blocks, in page order: the search function, LangChain's, LlamaIndex's."""
    section = PAGE.read_text(encoding="utf-8").split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, flags=re.MULTILINE | re.DOTALL)


def run_blocks(*sources: str, url: str, key: str) -> dict:
    """The blocks executed in order in one namespace, against ``url`` with ``key``; the namespace."""
    namespace: dict = {}
    for source in sources:
        assert PLACEHOLDER_URL in source or "def rag_search" in source, source
        exec(source.replace(PLACEHOLDER_URL, url).replace(PLACEHOLDER_KEY, key), namespace)
    return namespace


def api_hits(body: dict) -> list[dict]:
    response = api_client().post("/api/v1/search", json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()["hits"]


def metadata(hit: dict) -> dict:
    return {name: hit[name] for name in ("citation", "source", "path", "title", "start_line", "end_line", "chunk_id")}


@pytest.fixture
def corpus(tmp_path, settings):
    """A skill and a root of two files, all shared; the skill and one file are about backups."""
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "backup.md").write_text(
        "# Database backup\n\nBack up the database with pg_dump before each upgrade.\n"
    )
    (tmp_path / "ops" / "app.py").write_text("def handle_order(order):\n    return order\n")
    root = WorkspaceRoot.objects.create(name="ops", path=str(tmp_path / "ops"))
    assert index_root(root).status == JobStatus.SUCCEEDED
    services.skill_index(skill_id=SkillFactory(slug="deploy", body=SKILL).pk)


@pytest.fixture
def page_blocks() -> list[str]:
    found = blocks()
    assert len(found) == 3, f"{SECTION} should hold the search function and two retrievers: {found}"
    assert all(f'"{QUERY}"' in block for block in found[1:]), "the page's blocks search for something else"
    return found


def test_the_langchain_retriever_answers_the_search_hits_in_order_with_their_citations(
    live_server, corpus, page_blocks
):
    search, langchain, _ = page_blocks
    namespace = run_blocks(search, langchain, url=live_server.url, key=api_key_create(name="chain")[1])

    expected = api_hits({"query": QUERY, "k": K})
    documents = namespace["documents"]
    assert {hit["citation"].split(":")[0] for hit in expected} >= {"skill", "backup.md"}
    assert [document.page_content for document in documents] == [hit["content"] for hit in expected]
    assert [document.metadata for document in documents] == [
        {**metadata(hit), "score": hit["score"]} for hit in expected
    ]

    # The search's other fields pass through: only files, as the API answers them.
    files_only = namespace["RagSiteRetriever"](
        url=live_server.url, key=api_key_create(name="files")[1], k=K, options={"sources": ["file"]}
    ).invoke(QUERY)
    expected = api_hits({"query": QUERY, "k": K, "sources": ["file"]})
    assert {hit["source"] for hit in expected} == {"file"}
    assert [document.metadata["citation"] for document in files_only] == [hit["citation"] for hit in expected]


def test_the_llamaindex_retriever_answers_the_search_hits_in_order_with_their_citations_and_scores(
    live_server, corpus, page_blocks
):
    search, _, llamaindex = page_blocks
    namespace = run_blocks(search, llamaindex, url=live_server.url, key=api_key_create(name="llama")[1])

    expected = api_hits({"query": QUERY, "k": K})
    nodes = namespace["nodes"]
    assert expected and len(nodes) == len(expected)
    assert [node.node.get_content() for node in nodes] == [hit["content"] for hit in expected]
    assert [node.node.metadata for node in nodes] == [metadata(hit) for hit in expected]
    assert [node.score for node in nodes] == [hit["score"] for hit in expected]
    assert [node.node.node_id for node in nodes] == [str(hit["chunk_id"]) for hit in expected]
    # What LlamaIndex hands the model carries the citation with the text.
    assert expected[0]["citation"] in nodes[0].node.get_content(metadata_mode="llm")


def test_a_refused_key_raises_the_apis_error(live_server, corpus, page_blocks):
    search, langchain, _ = page_blocks
    with pytest.raises(urllib.error.HTTPError) as refused:
        run_blocks(search, langchain, url=live_server.url, key="rag_not-a-key")
    assert refused.value.code == 401
    assert json.load(refused.value)["error"]
