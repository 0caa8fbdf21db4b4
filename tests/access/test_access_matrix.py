"""The scope matrix: every surface x every identity sees exactly what it may.

Real PostgreSQL, the real embedding model, real HTTP handling. Each source
carries a marker word; a surface's answer is reduced to the markers it
shows, and that set must equal the identity's row in ``VISIBLE``: nothing
missing, nothing leaked, through every channel (hybrid, lexical, vector,
the substring fallback, MMR, rerank, grouping).
"""

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client

from access.identity import identity_for_key
from access.keys import api_key_create
from access.models import AccessGrant
from sources import services, tools
from sources.models import Segment, Skill, Tool, WorkspaceRoot
from tests.conftest import api_client, index_root
from tests.surfaces.test_mcp import call_message, mcp_post, tool_call

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
    "key_plain": SHARED,  # no bot, client or channel, no manage permission
    "staff_bare": SHARED,  # is_staff, no permission, no grant: the admin refuses it everything, and so does the API
    "staff_alpha": SHARED | {"zebraalpha", "zebrarootalpha"},  # is_staff, granted bot alpha, managing permissions
    "person_session": SHARED | {"zebraalpha", "zebrarootalpha"} | OPS,  # granted bot alpha, and ops through a group
    "person_bare": SHARED,  # no grant: what every first single sign-on gets
    "superuser_session": ALL,
}
# Who may list roots, read their jobs and re-index them (issue 39: staff status alone is none of these).
MANAGERS = {"key_manage", "staff_alpha", "superuser_session"}
SESSIONS = {"staff_bare", "staff_alpha", "person_session", "person_bare", "superuser_session"}
# staff_alpha's Django permissions: what the admin lets it manage, and so the API (within its grant, bot alpha).
STAFF_ALPHA_PERMISSIONS = [
    ("sources", "view_workspaceroot"),
    ("sources", "change_workspaceroot"),
    ("sources", "view_indexjob"),
    ("sources", "view_uploadeddocument"),
    ("sources", "add_uploadeddocument"),
    ("sources", "delete_uploadeddocument"),
]
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
        "key_plain": {},
    }
    if name in keys:
        return api_client(name=name, **keys[name])
    client = Client()
    if name == "staff_bare":
        client.force_login(django_user_model.objects.create_user("staff", password="x-long-password-1", is_staff=True))
    elif name == "staff_alpha":
        staff = django_user_model.objects.create_user("staff-alpha", password="x-long-password-4", is_staff=True)
        AccessGrant.objects.create(user=staff, bot_id="alpha")
        staff.user_permissions.set(
            [Permission.objects.get(content_type__app_label=a, codename=c) for a, c in STAFF_ALPHA_PERMISSIONS]
        )
        client.force_login(staff)
    elif name == "person_bare":
        client.force_login(django_user_model.objects.create_user("newcomer", password="x-long-password-5"))
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
        # 429: the root was verified within its cooldown; 403: a person re-indexes a shared root only with write_shared.
        reindex = 429 if "shared" in MANAGED[identity]["reindex"] else 403
        assert [r.status_code for r in answers] == [200, 200, reindex]
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
        path: post(client, path, {"query": QUERY, **widening})
        for path in ("/api/v1/search", "/api/v1/skills/search", "/api/v1/tools/search")
    }
    # An unknown field is a 422 (retrieval/schemas.py BodyIn): only /context takes a budget.
    answers["/api/v1/context"] = post(client, "/api/v1/context", {"query": QUERY, "budget_tokens": 1000, **widening})
    answers["/api/v1/grep"] = post(client, "/api/v1/grep", {"pattern": "procedure", **widening})
    answers["/api/v1/read"] = client.get(
        "/api/v1/read", {"root": "shared", "path": "main.md", **widening}
    )  # channels repeated
    for path, response in answers.items():
        assert response.status_code == 403, (path, response.content)
        assert "may not act for" in response.json()["error"] and response.json()["data"]["field"] == field
    if identity in KEYS:
        refused = tool_call(client, "search", {"query": QUERY, **widening})
        assert refused["isError"] and refused["structuredContent"]["status"] == 403, refused
        assert refused["structuredContent"]["data"]["field"] == field


# --- managing: what each identity may change, and that a refusal changes nothing (issue 39) --------------------------

EVERY_SCOPE = {"shared", "alpha", "beta"}
# identity -> the scopes (a root's, a document's) it may manage with each action; absent: refused every one.
MANAGED = {
    "key_manage": dict.fromkeys(("roots", "reindex", "documents", "upload", "delete"), EVERY_SCOPE),
    "superuser_session": dict.fromkeys(("roots", "reindex", "documents", "upload", "delete"), EVERY_SCOPE),
    # Within its grant: it sees shared roots, but re-indexes them and writes the shared scope only with
    # access.write_shared (as the admin's re-index button).
    "staff_alpha": {
        "roots": {"shared", "alpha"},
        "reindex": {"alpha"},
        "documents": {"shared", "alpha"},
        "upload": {"alpha"},
        "delete": {"alpha"},
    },
}
HEALTH_DETAILS = {"key_manage", "superuser_session"}
SCOPES = {"shared": {}, "alpha": {"bot_id": "alpha"}, "beta": {"bot_id": "beta"}}


def _documents() -> dict[str, int]:
    from sources import uploads

    return {
        name: uploads.document_upload(
            uploads.Upload(f"{name}.csv", f"zebradoc,{name}\n1,2\n".encode()), max_bytes=1 << 20, **scope
        ).document.pk
        for name, scope in SCOPES.items()
    }


def _upload(client: Client, name: str, scope: dict):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = {"file": [SimpleUploadedFile(f"new-{name}.csv", f"zebranew,{name}\n3,4\n".encode())], **scope}
    return client.post("/api/v1/documents", data=data)


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_every_managing_endpoint_does_only_what_the_identity_may(identity, sources, tmp_path, django_user_model):
    from sources.models import IndexJob, UploadedDocument

    (tmp_path / "beta").mkdir()
    (tmp_path / "beta" / "notes.md").write_text("# Beta\n\nThe zebrarootbeta procedure.\n")
    roots = {**sources, "beta": WorkspaceRoot.objects.create(name="beta", path=str(tmp_path / "beta"), bot_id="beta")}
    index_root(roots["beta"])
    jobs = {name: root.jobs.first().pk for name, root in roots.items()}
    documents = _documents()
    job_counts = {name: root.jobs.count() for name, root in roots.items()}
    client = caller(identity, django_user_model)
    may = MANAGED.get(identity, {})
    refused = 401 if identity == "anonymous" else 403

    listed = client.get("/api/v1/roots")
    if "roots" in may:
        assert listed.status_code == 200 and {root["name"] for root in listed.json()} == may["roots"]
        for name, job_id in jobs.items():
            assert client.get(f"/api/v1/index-jobs/{job_id}").status_code == (200 if name in may["roots"] else 404)
    else:
        assert listed.status_code == refused and str(tmp_path) not in listed.content.decode()
        for job_id in jobs.values():
            answer = client.get(f"/api/v1/index-jobs/{job_id}")
            assert answer.status_code == refused and str(tmp_path) not in answer.content.decode()
        if identity != "anonymous":
            assert "sources.view_workspaceroot" in listed.json()["error"]  # the refusal names what is missing

    for name, root in roots.items():
        answer = post(client, f"/api/v1/roots/{root.pk}/reindex", {"force": True})
        allowed = name in may.get("reindex", ())
        if allowed:
            expected = 202
        elif "reindex" in may:  # a root it sees but may not re-index (shared): 403; one it does not see: 404
            expected = 403 if name in may.get("roots", ()) else 404
        else:
            expected = refused
        assert answer.status_code == expected, (name, answer.content)
        assert root.jobs.count() == job_counts[name] + allowed, name

    listed = client.get("/api/v1/documents")
    if "documents" in may:
        assert {d["name"] for d in listed.json()} == {f"{name}.csv" for name in may["documents"]}
    else:
        assert listed.status_code == refused and "zebradoc" not in listed.content.decode()

    for name, scope in SCOPES.items():
        answer = _upload(client, name, scope)
        allowed = name in may.get("upload", ())
        assert answer.status_code == (201 if allowed else refused), (name, answer.content)
        assert UploadedDocument.objects.filter(name=f"new-{name}.csv").exists() == allowed, name

    for name, document_id in documents.items():
        answer = client.delete(f"/api/v1/documents/{document_id}")
        allowed = name in may.get("delete", ())
        unseen = "delete" in may and name not in may["documents"]
        assert answer.status_code == (204 if allowed else 404 if unseen else refused), (name, answer.content)
        assert UploadedDocument.objects.filter(pk=document_id).exists() != allowed, name
    assert IndexJob.objects.filter(root__in=roots.values()).count() == sum(job_counts.values()) + len(
        may.get("reindex", ())
    )

    checks = client.get("/api/v1/health").json()["checks"]
    assert any("details" in check for check in checks.values()) == (identity in HEALTH_DETAILS)


# identity -> who may write the shared scope: create a shared memory, change, supersede or forget one.
SHARED_WRITERS = {"key_manage", "superuser_session"}
# identity -> the scope its memory gets when it names none (None: refused, 401 or 403).
OWN_MEMORY = {
    "anonymous": None,
    "key_alpha": ("alpha", "", []),
    "key_beta": ("beta", "", []),
    "key_client_x": ("", "client-x", []),
    "key_ops": ("", "", ["ops"]),
    "key_manage": ("", "", []),
    "key_plain": None,  # no bot is no right to write the shared scope
    "staff_bare": None,
    "staff_alpha": ("alpha", "", []),
    "person_session": ("alpha", "", ["ops"]),
    "person_bare": None,
    "superuser_session": ("", "", []),
}


def _shared_memory(text: str) -> int:
    from retrieval.memories import memory_remember
    from retrieval.memory_schemas import MemoryIn

    writer = identity_for_key(api_key_create(name="writer", can_manage=True)[0])
    return memory_remember(writer, MemoryIn(text=text), approval_required=False).id


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_memory_writes_stay_in_the_scope_the_identity_may_write(identity, sources, django_user_model):
    from sources.models import Memory

    shared = {action: _shared_memory(f"Zebrashared fact for {action}.") for action in ("patch", "supersede", "forget")}
    before = {memory.pk: (memory.text, memory.superseded_at) for memory in Memory.objects.all()}
    client = caller(identity, django_user_model)
    refused = 401 if identity == "anonymous" else 403
    writes_shared = identity in SHARED_WRITERS

    created = post(client, "/api/v1/memories", {"text": "Zebranew fact."})
    if OWN_MEMORY[identity] is None:
        assert created.status_code == refused, created.content
        assert not Memory.objects.filter(text="Zebranew fact.").exists()
        if identity != "anonymous":
            assert "access.write_shared" in created.json()["error"]
    else:
        assert created.status_code == 201, created.content
        body = created.json()
        assert (body["bot_id"], body["client_id"], body["channels"]) == OWN_MEMORY[identity]

    patched = client.patch(
        f"/api/v1/memories/{shared['patch']}",
        data=json.dumps({"text": "Overwritten."}),
        content_type="application/json",
    )
    superseding = post(client, "/api/v1/memories", {"text": "Replaced.", "supersedes": shared["supersede"]})
    forgotten = client.delete(f"/api/v1/memories/{shared['forget']}")
    statuses = [patched.status_code, superseding.status_code, forgotten.status_code]
    assert statuses == ([201, 201, 204] if writes_shared else [refused] * 3), [patched, superseding, forgotten]
    if not writes_shared:
        after = {memory.pk: (memory.text, memory.superseded_at) for memory in Memory.objects.all()}
        assert {pk: after[pk] for pk in before} == before  # nothing changed, superseded or forgotten
        assert not Memory.objects.filter(text__in=["Overwritten.", "Replaced."]).exists()

    # MCP's remember and forget: the same rule, for keys (a session is no credential there).
    if identity in KEYS:
        other = _shared_memory("Zebrashared fact for MCP.")
        remembered = tool_call(client, "remember", {"text": "Zebramcp fact."})
        forgot = tool_call(client, "forget", {"id": other})
        assert remembered["isError"] == (OWN_MEMORY[identity] is None), remembered
        assert forgot["isError"] != writes_shared, forgot
        assert Memory.objects.filter(pk=other).exists() != writes_shared
        if not writes_shared:
            assert forgot["structuredContent"]["status"] == 403


def _staff(django_user_model, name: str, codenames: list[tuple[str, str]], **grant) -> Client:
    user = django_user_model.objects.create_user(name, password="x-long-password-6", is_staff=True)
    user.user_permissions.set([Permission.objects.get(content_type__app_label=a, codename=c) for a, c in codenames])
    AccessGrant.objects.create(user=user, **grant)
    client = Client()
    client.force_login(user)
    return client


def test_a_person_bound_to_a_channel_uploads_only_documents_gated_to_some_of_them(sources, django_user_model):
    """Security review of issue 39, item 4: an empty channel list is every channel, not "not asked"."""
    from sources.models import UploadedDocument

    client = _staff(django_user_model, "staff-ops", STAFF_ALPHA_PERMISSIONS, bot_id="alpha", channels="ops")
    ungated = _upload(client, "ungated", {"bot_id": "alpha"})
    assert ungated.status_code == 403 and ungated.json()["data"]["field"] == "channels", ungated.content
    botless = _upload(client, "botless", {"channels": "ops"})
    assert botless.status_code == 403 and botless.json()["data"]["field"] == "bot_id", botless.content
    assert not UploadedDocument.objects.exists()
    assert _upload(client, "gated", {"bot_id": "alpha", "channels": "ops"}).status_code == 201
    # A person granted a bot without channels reads alpha's ungated rows only, and writes them.
    assert _upload(caller("staff_alpha", django_user_model), "alpha", {"bot_id": "alpha"}).status_code == 201


def test_a_jobs_errors_name_only_files_of_segments_the_caller_sees(sources, django_user_model):
    """Security review of issue 39, item 6: the API's job errors follow the admin's job page."""
    root = sources["shared"]
    (Path(root.path) / "docs" / "payroll-secret.md").write_bytes(b"\x7fELF\x00\x00")
    job = index_root(root)
    assert any("payroll-secret" in row.get("path", "") for row in job.errors)
    for identity, sees in (("staff_alpha", False), ("key_manage", True), ("superuser_session", True)):
        client = caller(identity, django_user_model)
        answers = [client.get(f"/api/v1/index-jobs/{job.pk}"), client.get("/api/v1/roots")]
        for answer in answers:
            assert answer.status_code == 200, (identity, answer.content)
        assert ("payroll-secret" in answers[0].content.decode()) == sees, identity
        assert ("payroll-secret" in answers[1].content.decode()) == sees, identity
