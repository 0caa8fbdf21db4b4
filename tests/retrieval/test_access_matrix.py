"""The scope matrix: every surface x every identity sees exactly what it may.

Real PostgreSQL, the real embedding model, real HTTP handling. Each source
carries a marker word; a surface's answer is reduced to the markers it
shows, and that set must equal the identity's row in ``VISIBLE``: nothing
missing, nothing leaked, through every channel (hybrid, lexical, vector,
the substring fallback, MMR, rerank, grouping).
"""

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from access.models import AccessGrant
from sources import services, tools
from sources.models import Segment, Skill, Tool, WorkspaceRoot
from tests.conftest import api_client, index_root
from tests.retrieval.test_mcp import call_message, mcp_post, tool_call

pytestmark = pytest.mark.django_db

# marker -> who may see it (besides a superuser): bot, client, channel.
SKILLS = {
    "zebrashared": {},
    "zebraalpha": {"bot_id": "alpha"},
    "zebrabeta": {"bot_id": "beta"},
    "zebraclientx": {"client_id": "client-x"},
    "zebraops": {"channels": "ops"},
}
TOOLS = {"zebratoolshared": {}, "zebratoolbeta": {"bot_id": "beta"}, "zebratoolops": {"channels": "ops"}}
# The shared root (its docs/ segment gated to ops) and a root of bot alpha.
FILES = {"zebrarootshared": "shared/main.md", "zebrasegops": "shared/docs/ops.md", "zebrarootalpha": "alpha/notes.md"}
ALL = {*SKILLS, *TOOLS, *FILES}
SHARED = {"zebrashared", "zebratoolshared", "zebrarootshared"}
OPS = {"zebraops", "zebratoolops", "zebrasegops"}

# identity -> the markers it must see, exactly.
VISIBLE = {
    "anonymous": SHARED,
    "key_alpha": SHARED | {"zebraalpha", "zebrarootalpha"},
    "key_beta": SHARED | {"zebrabeta", "zebratoolbeta"},
    "key_client_x": SHARED | {"zebraclientx"},
    "key_ops": SHARED | OPS,
    "key_manage": SHARED,
    "staff_session": SHARED,
    "person_session": SHARED | {"zebraalpha", "zebrarootalpha"} | OPS,  # granted bot alpha, and ops through a group
    "superuser_session": ALL,
}
MANAGERS = {"key_manage", "staff_session", "superuser_session"}
SESSIONS = {"staff_session", "person_session", "superuser_session"}
KEYS = {identity for identity in VISIBLE if identity.startswith("key_")}  # MCP takes API keys only
QUERY = " ".join(sorted(ALL))


@pytest.fixture
def sources(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    for marker, scope in SKILLS.items():
        skill = Skill.objects.create(
            slug=marker, body=f"# Note {marker}\n\nThe {marker} procedure => step one.\n", **scope
        )
        services.skill_index(skill_id=skill.pk)
    for marker, scope in TOOLS.items():
        tool = Tool.objects.create(name=f"run_{marker}", description=f"Runs the {marker} procedure => now.", **scope)
        tools.tool_index(tool_id=tool.pk)
    for marker, relative in FILES.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# File {marker}\n\nThe {marker} procedure => step two.\n")
    shared = WorkspaceRoot.objects.create(name="shared", path=str(tmp_path / "shared"))
    Segment.objects.create(root=shared, name="ops docs", path_glob="docs/**", channels="ops")
    alpha = WorkspaceRoot.objects.create(name="alpha", path=str(tmp_path / "alpha"), bot_id="alpha")
    index_root(shared)
    index_root(alpha)
    # Every chunk counts: no similarity cut-off, no rate limit, no rerank floor.
    for kind in ("SKILL", "FILE", "TOOL"):
        setattr(settings, f"RAG_SIMILARITY_THRESHOLD_{kind}", -1.0)
    settings.RAG_RATE_LIMIT_PER_MINUTE = settings.RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE = 0
    settings.RAG_ANONYMOUS_SEARCH = True
    settings.RAG_SEARCH_DEFAULT_K = 50  # the page shows every hit
    return {"shared": shared, "alpha": alpha}


def caller(name: str, django_user_model) -> Client:
    keys = {
        "key_alpha": {"bot_id": "alpha"},
        "key_beta": {"bot_id": "beta"},
        "key_client_x": {"client_id": "client-x"},
        "key_ops": {"channels": "ops"},
        "key_manage": {"can_manage": True},
    }
    if name in keys:
        return api_client(name=name, **keys[name])
    client = Client()
    if name == "staff_session":
        client.force_login(django_user_model.objects.create_user("staff", password="x-long-password-1", is_staff=True))
    elif name == "superuser_session":
        client.force_login(django_user_model.objects.create_superuser("boss", password="x-long-password-2"))
    elif name == "person_session":
        person = django_user_model.objects.create_user("person", password="x-long-password-3")
        AccessGrant.objects.create(user=person, bot_id="alpha")
        team = Group.objects.create(name="ops team")
        AccessGrant.objects.create(group=team, channels="ops")
        person.groups.add(team)
        client.force_login(person)
    return client


def post(client: Client, path: str, payload: dict):
    return client.post(path, data=json.dumps(payload), content_type="application/json")


def markers(texts) -> set[str]:
    joined = "\n".join(texts)
    return {marker for marker in ALL if marker in joined}


def searched(client: Client, **options) -> set[str]:
    response = post(client, "/api/v1/search", {"query": QUERY, "k": 50, **options})
    assert response.status_code == 200, response.content
    return markers(hit["content"] for hit in response.json()["hits"])


def mcp_answer(client: Client, tool: str, arguments: dict) -> dict:
    """An MCP tool's ``structuredContent``: the endpoint's JSON."""
    result = tool_call(client, tool, arguments)
    assert not result["isError"], result
    return result["structuredContent"]


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_every_surface_shows_exactly_what_the_identity_may_see(
    identity, sources, settings, tiny_model, django_user_model
):
    client = caller(identity, django_user_model)
    expected = VISIBLE[identity]

    # Search, through every channel and post-processing step.
    assert searched(client) == expected
    assert searched(client, mode="lexical") == expected
    assert searched(client, mode="vector") == expected
    assert searched(client, mode="hybrid", mmr=True) == expected
    assert searched(client, group=True) == expected
    settings.RAG_RERANK_MODEL, settings.RAG_RERANK_MIN_CHARS, settings.RAG_RERANK_SCORE_THRESHOLD = tiny_model, 0, 0.0
    reranked = post(client, "/api/v1/search", {"query": QUERY, "k": 50, "rerank": True}).json()
    assert (
        all(hit["rerank"] is not None for hit in reranked["hits"])
        and markers(h["content"] for h in reranked["hits"]) == expected
    )
    # "=>" has no indexable word: the lexical channel falls back to a substring match.
    fallback = post(client, "/api/v1/search", {"query": "=>", "k": 50, "mode": "lexical"}).json()["hits"]
    assert markers(hit["content"] for hit in fallback) == expected

    # The skill index, the skill list and each skill by slug.
    skill_markers = expected & set(SKILLS)
    found = post(client, "/api/v1/skills/search", {"query": QUERY, "k": 50}).json()["skills"]
    assert {skill["slug"] for skill in found} == skill_markers
    assert {skill["slug"] for skill in client.get("/api/v1/skills").json()} == skill_markers
    for slug in SKILLS:
        assert client.get(f"/api/v1/skills/{slug}").status_code == (200 if slug in expected else 404), slug

    # Tools.
    found = post(client, "/api/v1/tools/search", {"query": QUERY, "k": 50}).json()["tools"]
    assert {tool["key"].removeprefix("local:run_") for tool in found} == expected & set(TOOLS)

    # Read and grep: the files on disk, indexed ones only.
    grepped = post(client, "/api/v1/grep", {"pattern": "procedure"})
    assert grepped.status_code == 200, grepped.content
    assert markers(match["text"] for match in grepped.json()["matches"]) == expected & set(FILES)
    for marker, relative in FILES.items():
        root, path = relative.split("/", 1)
        answer = client.get("/api/v1/read", {"root": root, "path": path})
        assert answer.status_code == (200 if marker in expected else 404), (marker, answer.content)
        assert (marker in answer.content.decode()) == (marker in expected), marker

    # LLM-ready context: the skill index, file evidence and tool schemas.
    context = post(
        client, "/api/v1/context", {"query": QUERY, "budget_tokens": 32000, "k": {"skill": 50, "file": 50, "tool": 50}}
    )
    assert context.status_code == 200, context.content
    assert markers([context.json()["text"], json.dumps(context.json()["tools"])]) == expected

    # The MCP tools (the same answers, for agents): API keys only, a session is no credential there.
    if identity in KEYS:
        found = mcp_answer(client, "search", {"query": QUERY, "k": 50})
        assert markers(hit["content"] for hit in found["hits"]) == expected
        context = mcp_answer(
            client, "get_context", {"query": QUERY, "budget_tokens": 32000, "k": {"skill": 50, "file": 50, "tool": 50}}
        )
        assert markers([context["text"], json.dumps(context["tools"])]) == expected
        found = mcp_answer(client, "search_skills", {"query": QUERY, "k": 50})
        assert {skill["slug"] for skill in found["skills"]} == expected & set(SKILLS)
        found = mcp_answer(client, "search_tools", {"query": QUERY, "k": 50})
        assert {tool["key"].removeprefix("local:run_") for tool in found["tools"]} == expected & set(TOOLS)
        grepped = mcp_answer(client, "grep", {"pattern": "procedure"})
        assert markers(match["text"] for match in grepped["matches"]) == expected & set(FILES)
    else:
        assert mcp_post(client, call_message("search", {"query": QUERY})).status_code == 401

    # Managing surfaces: roots (server paths), jobs, re-index.
    shared = sources["shared"]
    job = shared.jobs.first()
    answers = [
        client.get("/api/v1/roots"),
        client.get(f"/api/v1/index-jobs/{job.pk}"),
        post(client, f"/api/v1/roots/{shared.pk}/reindex", {"force": False}),
    ]
    if identity in MANAGERS:
        assert [r.status_code for r in answers] == [200, 200, 429]  # 429: the root was verified within its cooldown
        assert shared.path in {root["path"] for root in answers[0].json()}
    else:
        status = 401 if identity == "anonymous" else 403
        assert [r.status_code for r in answers] == [status] * 3
        assert all(shared.path not in r.content.decode() for r in answers)

    # The search page: people only.
    page = client.get("/", {"q": QUERY})
    if identity in SESSIONS:
        hits = page.content.decode().split('<li class="hit"')[1:]  # each hit's markup, up to the next one
        assert markers(hits) == expected
    else:
        assert page.status_code == 302 and "/accounts/login/" in page["Location"]


@pytest.mark.parametrize(
    ("identity", "narrowing", "expected"),
    [
        ("key_alpha", {"bot_id": "alpha"}, VISIBLE["key_alpha"]),
        ("key_ops", {"channels": []}, SHARED),  # no channel: ungated sources only
        ("person_session", {"bot_id": "alpha", "channels": []}, SHARED | {"zebraalpha", "zebrarootalpha"}),
        ("person_session", {"channels": ["ops"]}, SHARED | OPS | {"zebraalpha", "zebrarootalpha"}),
        (
            "superuser_session",
            {"bot_id": "beta", "channels": []},
            SHARED | {"zebrabeta", "zebratoolbeta", "zebraclientx"},
        ),
    ],
)
def test_a_request_may_narrow_its_scope(identity, narrowing, expected, sources, django_user_model):
    assert searched(caller(identity, django_user_model), **narrowing) == expected


@pytest.mark.parametrize(
    ("identity", "widening", "field"),
    [
        ("anonymous", {"bot_id": "alpha"}, "bot_id"),
        ("key_beta", {"bot_id": "alpha"}, "bot_id"),
        ("key_alpha", {"client_id": "client-x"}, "client_id"),
        ("key_alpha", {"channels": ["ops"]}, "channels"),
        ("key_ops", {"channels": ["ops", "support"]}, "channels"),
        ("person_session", {"bot_id": "beta"}, "bot_id"),
    ],
)
def test_a_request_that_asks_for_more_than_its_credentials_allow_gets_403(
    identity, widening, field, sources, django_user_model
):
    client = caller(identity, django_user_model)
    answers = {
        path: post(client, path, {"query": QUERY, "budget_tokens": 1000, **widening})  # extra fields are ignored
        for path in ("/api/v1/search", "/api/v1/skills/search", "/api/v1/tools/search", "/api/v1/context")
    }
    answers["/api/v1/grep"] = post(client, "/api/v1/grep", {"pattern": "procedure", **widening})
    answers["/api/v1/read"] = client.get(
        "/api/v1/read", {"root": "shared", "path": "main.md", **widening}
    )  # channels repeated
    for path, response in answers.items():
        assert response.status_code == 403, (path, response.content)
        assert "may not act for" in response.json()["error"] and response.json()["detail"]["field"] == field
    if identity in KEYS:
        refused = tool_call(client, "search", {"query": QUERY, **widening})
        assert refused["isError"] and refused["structuredContent"]["status"] == 403, refused
        assert refused["structuredContent"]["detail"]["field"] == field
