"""One query language on every surface (issue 41, item 3): the page, /api/v1/search and the MCP search tool run the
same parsed query through the same engine, so the same text finds the same hits; one list of kinds, documents
included; request bodies refuse fields they do not know."""

import json
import re

import pytest

from sources import services, uploads
from tests import documents
from tests.conftest import index_root
from tests.factories import SkillFactory
from tests.surfaces.test_mcp import tool_call

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def corpus(tmp_path, settings):
    """A root of code and notes, a skill and an uploaded PDF, all shared: each kind the language can narrow to."""
    from sources.models import WorkspaceRoot

    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_CHUNK_MAX_CHARS = 120  # a class this long is a chunk per method
    (tmp_path / "changelist.py").write_text(
        'class ChangeList:\n    """The rows of the list page and the filters beside them."""\n\n'
        "    def get_filters(self, request):\n        return self.filter_specs, self.has_filters\n\n"
        "    def get_results(self, request):\n        return self.queryset.all()[: self.list_per_page]\n"
    )
    (tmp_path / "filters.py").write_text(
        "def get_filters(spec):\n    '''Filters of a spec.'''\n    return spec.items\n"
    )
    (tmp_path / "rollback.md").write_text(
        "# Rollback\n\nTo roll back a release, revert the release tag and deploy again.\n"
    )
    (tmp_path / "staging.md").write_text("# Staging rollback\n\nA staging rollback of the release is a redeploy.\n")
    (tmp_path / "rollback-notes.md").write_text("# Rollback notes\n\nA rollback of the release needs a tag.\n")
    root = index_root(WorkspaceRoot.objects.create(name="django", path=str(tmp_path)))
    services.skill_index(
        skill_id=SkillFactory(slug="releases", body="# Releases\n\nHow a release is tagged and rolled back.\n").pk
    )
    document = uploads.document_upload(
        uploads.Upload("report.pdf", documents.report_pdf()), max_bytes=50 * 1024 * 1024
    ).document
    uploads.document_index(document_id=document.pk)
    return root


def search(client, payload: dict, *, status: int = 200) -> dict:
    response = client.post("/api/v1/search", data=json.dumps(payload), content_type="application/json")
    assert response.status_code == status, response.content
    return response.json()


def page_hits(client, query: str, **filters) -> list[str]:
    """The page's hits as the links they open (viewer URL with the lines), in rank order."""
    partial = client.get("/", {"q": query, **filters}, headers=HTMX).content.decode()
    return re.findall(r'<a class="open" href="([^"]+)">', partial)


def api_links(hits: list[dict], root_id: int) -> list[str]:
    return [f"/view/file/{root_id}/{hit['path']}#L{hit['start_line']}-L{hit['end_line']}" for hit in hits]


def test_sym_finds_the_same_definitions_on_the_page_through_the_api_and_mcp(client, person, key_client, corpus):
    page = page_hits(client, "sym:get_filters")
    api = search(key_client, {"query": "sym:get_filters"})
    assert api["form"] == "symbol" and not api["grep"]
    assert {hit["path"] for hit in api["hits"]} == {"changelist.py", "filters.py"}
    assert all(hit["symbol"].endswith("get_filters") for hit in api["hits"])
    assert page == api_links(api["hits"], corpus.root_id)
    mcp = tool_call(key_client, "search", {"query": "sym:get_filters"})
    assert not mcp.get("isError") and mcp["structuredContent"]["hits"] == api["hits"]
    # A filter after it narrows the same way everywhere.
    dotted = search(key_client, {"query": "sym:get_filters file:changelist"})
    assert [hit["path"] for hit in dotted["hits"]] == ["changelist.py"]
    assert page_hits(client, "sym:get_filters file:changelist") == api_links(dotted["hits"], corpus.root_id)


def test_kind_document_narrows_to_uploaded_documents_on_the_page_and_through_the_api(
    client, person, key_client, corpus
):
    query = f"{documents.PAGE_THREE_PHRASE} kind:document"
    api = search(key_client, {"query": query})
    assert api["hits"] and {hit["source"] for hit in api["hits"]} == {"document"}
    assert api["hits"][0]["path"] == "report.pdf"
    page = page_hits(client, query)
    assert page and all(link.startswith("/view/document/") for link in page)
    # The page shows one card per file: the API's hits grouped the same way.
    grouped = search(key_client, {"query": query, "group": "file"})
    assert len(page) == len(grouped["hits"]) == len({hit["source_key"] for hit in api["hits"]})
    # The request's own field says the same: "sources": ["document"] (422 before there was one list of kinds).
    asked = search(key_client, {"query": documents.PAGE_THREE_PHRASE, "sources": ["document"]})
    assert [hit["chunk_id"] for hit in asked["hits"]] == [hit["chunk_id"] for hit in api["hits"]]
    # And the page's menu holds the same kinds as the API's schema.
    schema = key_client.get("/api/openapi.json").json()["components"]["schemas"]["SearchIn"]
    kinds = schema["properties"]["sources"]["items"]["enum"]
    menu = client.get("/").content.decode()
    assert kinds == ["skill", "file", "tool", "document", "memory"]
    assert all(f'<option value="{kind}"' in menu for kind in kinds)


def test_a_kind_the_query_and_the_request_do_not_share_is_refused_naming_both(key_client, corpus):
    refused = search(key_client, {"query": "release kind:document", "sources": ["skill"]}, status=422)
    assert "kind:document" in refused["error"] and "skill" in refused["error"]
    unknown = search(key_client, {"query": "release kind:nope"}, status=422)
    assert "valid kinds: skill, file, tool, document, memory" in unknown["error"]
    within = search(key_client, {"query": "release kind:skill", "sources": ["skill", "file"]})
    assert within["hits"] and {hit["source"] for hit in within["hits"]} == {"skill"}


def test_a_minus_term_leaves_out_the_hits_that_hold_it(client, person, key_client, corpus):
    everything = search(key_client, {"query": "rollback release", "mode": "lexical", "sources": ["file"]})
    assert "staging.md" in {hit["path"] for hit in everything["hits"]}
    without = search(key_client, {"query": "rollback release -staging", "mode": "lexical", "sources": ["file"]})
    assert without["hits"] and all("staging" not in hit["content"].lower() for hit in without["hits"])
    assert "staging.md" not in {hit["path"] for hit in without["hits"]}
    page = page_hits(client, "rollback release -staging", mode="lexical", kind="file")
    assert page == api_links(without["hits"], corpus.root_id)


def test_exact_text_must_be_in_the_hit_letter_case_aside(key_client, corpus):
    loose = search(key_client, {"query": "roll back release", "mode": "lexical"})
    assert any("roll back" not in hit["content"].lower() for hit in loose["hits"])  # rollback, rolled back
    exact = search(key_client, {"query": '"ROLL BACK" release', "mode": "lexical"})
    assert exact["form"] == "search" and [hit["path"] for hit in exact["hits"]] == ["rollback.md"]


def test_re_and_a_lone_phrase_answer_lines_like_grep_on_the_api_too(key_client, corpus):
    regex = search(key_client, {"query": r"re:def \w+_filters"})
    assert regex["form"] == "grep" and regex["hits"] == []
    assert [(m["path"], m["line"]) for m in regex["grep"]["matches"]] == [("changelist.py", 4), ("filters.py", 1)]
    narrowed = search(key_client, {"query": r"file:filters.py re:def \w+_filters"})
    assert [m["path"] for m in narrowed["grep"]["matches"]] == ["filters.py"]
    excluded = search(key_client, {"query": r"-changelist re:def \w+_filters"})  # its path holds the word
    assert [m["path"] for m in excluded["grep"]["matches"]] == ["filters.py"]
    assert search(key_client, {"query": r"lang:markdown re:def \w+_filters"})["grep"]["matches"] == []
    assert len(search(key_client, {"query": r"lang:python re:def \w+_filters"})["grep"]["matches"]) == 2
    phrase = search(key_client, {"query": '"filters beside them"'})
    assert phrase["form"] == "grep" and [m["line"] for m in phrase["grep"]["matches"]] == [2]


def test_a_query_of_filters_alone_or_a_broken_one_is_refused_with_a_reason(client, person, key_client, corpus):
    assert "only filters" in search(key_client, {"query": "kind:file lang:python"}, status=422)["error"]
    assert "-kind: cannot be negated" in search(key_client, {"query": "release -kind:file"}, status=422)["error"]
    partial = client.get("/", {"q": "release kind:nope"}, headers=HTMX).content.decode()
    assert 'role="alert"' in partial and "valid kinds" in partial and "How to write a query" in partial


def test_the_page_menus_and_the_query_filters_combine(client, person, corpus):
    assert page_hits(client, "sym:get_filters", language="python") == page_hits(client, "sym:get_filters lang:python")
    clash = client.get("/", {"q": "sym:get_filters lang:go", "language": "python"}, headers=HTMX).content.decode()
    assert 'role="alert"' in clash and "drop one" in clash
    assert page_hits(client, "release root:django", kind="file") == page_hits(client, "release", kind="file")
    assert page_hits(client, "release root:elsewhere") == []  # a root one cannot see holds nothing


def test_the_api_says_no_good_match_where_the_page_does(client, person, key_client, settings):
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = -1.0  # every skill is a hit, however far: only the notice decides
    services.skill_index(
        skill_id=SkillFactory(slug="deploy", body="# Deploy\n\n## Rollback\n\nRevert the release tag.\n").pk
    )
    gibberish = search(key_client, {"query": "kezuva mipotal"})
    assert gibberish["hits"] and gibberish["no_good_match"]
    assert "No good match" in client.get("/", {"q": "kezuva mipotal"}, headers=HTMX).content.decode()
    real = search(key_client, {"query": "roll back a release"})
    assert real["hits"] and not real["no_good_match"]


BODIES = [
    ("/api/v1/search", {"query": "rollback"}),
    ("/api/v1/context", {"query": "rollback", "budget_tokens": 200}),
    ("/api/v1/grep", {"pattern": "rollback"}),
    ("/api/v1/skills/search", {"query": "rollback"}),
    ("/api/v1/tools/search", {"query": "rollback"}),
    ("/api/v1/memories/recall", {"query": "rollback"}),
    ("/api/v1/memories", {"text": "Rollbacks need a tag."}),
    ("/api/v1/answer", {"query": "rollback"}),
]


@pytest.mark.parametrize(("path", "body"), BODIES)
def test_an_unknown_field_in_any_body_is_refused_naming_it(key_client, settings, path, body):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    response = key_client.post(path, data=json.dumps({**body, "top_k": 3}), content_type="application/json")
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"].startswith("invalid request: top_k: unknown field")
    assert answer["errors"] == ["top_k: unknown field: not one this request takes (a typo? the schema lists them)"]


def test_an_unknown_field_in_a_nested_object_is_named_with_its_path(key_client):
    body = {"query": "rollback", "budget_tokens": 200, "k": {"files": 3}}
    response = key_client.post("/api/v1/context", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 422 and response.json()["errors"][0].startswith("k.files: unknown field")


def test_an_unknown_argument_of_an_mcp_tool_is_refused_naming_it(key_client):
    result = tool_call(key_client, "search", {"query": "rollback", "top_k": 3})
    assert result["isError"] and "top_k: unknown field" in result["content"][0]["text"]


def test_every_request_body_schema_forbids_unknown_fields(client):
    """What the OpenAPI document tells clients: no operation's body (nor an object inside one) takes extra fields."""
    document = client.get("/api/openapi.json").json()
    schemas = document["components"]["schemas"]
    refs = re.compile(r'"#/components/schemas/(\w+)"')
    bodies = {
        name
        for operations in document["paths"].values()
        for operation in operations.values()
        for name in refs.findall(json.dumps(operation.get("requestBody", {})))
    }
    seen: set[str] = set()
    while bodies - seen:
        name = (bodies - seen).pop()
        seen.add(name)
        bodies |= set(refs.findall(json.dumps(schemas[name])))
    assert {"SearchIn", "ContextIn", "ContextK", "GrepIn", "SkillSearchIn", "RecallIn", "MemoryIn"} <= seen
    objects = [name for name in seen if schemas[name].get("type") == "object"]
    assert [name for name in objects if schemas[name].get("additionalProperties") is not False] == []


def post(client, path: str, payload: dict, *, status: int = 200) -> dict:
    response = client.post(path, data=json.dumps(payload), content_type="application/json")
    assert response.status_code == status, response.content
    return response.json()


def test_context_speaks_the_query_language(key_client, corpus):
    """/context (and the Answer box, which reads it) narrows by the same filters as /search."""
    every = post(key_client, "/api/v1/context", {"query": "rollback release", "budget_tokens": 2000})
    assert {part["kind"] for part in every["parts"]} >= {"skill", "file"}
    assert "staging.md" in every["text"]
    # kind: picks the kinds searched; a path filter and an exclusion hold on the evidence.
    files = post(key_client, "/api/v1/context", {"query": "rollback release kind:file -staging", "budget_tokens": 2000})
    assert files["parts"] and {part["kind"] for part in files["parts"]} == {"file"}
    assert all("staging" not in part["citation"] for part in files["parts"])
    glob = post(key_client, "/api/v1/context", {"query": "rollback release file:rollback-*", "budget_tokens": 2000})
    assert [part["citation"].split(":")[0] for part in glob["parts"]] == ["rollback-notes.md"]
    # sym: gives the definitions' lines, and only files have them: no skill entry.
    sym = post(key_client, "/api/v1/context", {"query": "sym:get_filters", "budget_tokens": 2000})
    assert {part["citation"].split(":")[0] for part in sym["parts"]} == {"changelist.py", "filters.py"}
    # A lone phrase finds the chunks holding it; re: finds lines, which a context is not: a 422 saying where to go.
    phrase = post(key_client, "/api/v1/context", {"query": '"revert the release tag"', "budget_tokens": 2000})
    assert phrase["parts"] and all("revert the release tag" in part["content"] for part in phrase["parts"])
    refused = post(key_client, "/api/v1/context", {"query": "re:get_\\w+", "budget_tokens": 2000}, status=422)
    assert "re:" in refused["error"] and "/search" in refused["error"]


def test_skills_tools_and_recall_speak_the_query_language(key_client, corpus):
    skills = post(key_client, "/api/v1/skills/search", {"query": "release -tagged"})
    assert skills["skills"] == []  # the one skill says "tagged": left out
    assert [s["slug"] for s in post(key_client, "/api/v1/skills/search", {"query": "release rolled"})["skills"]] == [
        "releases"
    ]
    refused = post(key_client, "/api/v1/skills/search", {"query": "release root:django"}, status=422)
    assert "root:" in refused["error"] and "skill" in refused["error"]
    assert "re:" in post(key_client, "/api/v1/tools/search", {"query": "re:deploy.*"}, status=422)["error"]
    recalled = tool_call(key_client, "recall", {"query": "re:x"})
    assert recalled["isError"]
