"""Memories over the API: the scope matrix, supersede history, expiry, approval, and memories as a search kind.

Real PostgreSQL and the real embedding model. Indexing runs in this process
through the worker's own service (``memory_index``), as the other API tests
index skills; tests/sources/test_memories_worker.py sends it through a real
worker on the interactive queue.
"""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from sources.memories import memory_index
from sources.models import Chunk, IndexStatus, Memory, Source
from tests.conftest import api_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_rate_limit(settings):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0


def remember(client: Client, text: str, **fields) -> dict:
    response = client.post("/api/v1/memories", {"text": text, **fields}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def indexed(memory: dict) -> dict:
    memory_index(memory_id=memory["id"])
    return memory


def search(client: Client, query: str, **fields) -> list[dict]:
    response = client.post("/api/v1/search", {"query": query, **fields}, content_type="application/json")
    assert response.status_code == 200, response.content
    return response.json()["hits"]


def recall(client: Client, query: str) -> list[str]:
    response = client.post("/api/v1/memories/recall", {"query": query}, content_type="application/json")
    assert response.status_code == 200, response.content
    return [m["text"] for m in response.json()["memories"]]


def test_a_bot_remembers_a_fact_in_its_own_scope_with_its_provenance():
    alpha = api_client(name="alpha bot", bot_id="alpha", client_id="acme", channels="ops night")

    memory = remember(alpha, "The staging database moved to db-2.", conversation_id="conv-7", citation="runbook.md:3-9")

    assert memory["status"] == "active" and memory["index_status"] == "queued"
    assert (memory["bot_id"], memory["client_id"], memory["channels"]) == ("alpha", "acme", ["night", "ops"])
    assert memory["author"].startswith("API key ") and memory["conversation_id"] == "conv-7"
    assert memory["citation"] == "runbook.md:3-9" and memory["citation_key"] == f"memory:{memory['id']}"
    row = Memory.objects.get(pk=memory["id"])
    assert row.api_key is not None and row.api_key.name == "alpha bot"
    assert Source.objects.get(memory=row).kind == Source.Kind.MEMORY


def test_a_remembered_fact_is_found_by_search_as_its_own_kind_and_recalled():
    alpha = api_client(bot_id="alpha")
    memory = indexed(remember(alpha, "The staging database moved to db-2 in November."))
    assert Memory.objects.get(pk=memory["id"]).index_status == IndexStatus.INDEXED
    assert Chunk.objects.filter(source__memory__pk=memory["id"]).count() == 1

    hits = search(alpha, "where is the staging database", sources=["memory"])
    lexical = search(alpha, "staging database db-2", sources=["memory"], mode="lexical")

    assert [h["source"] for h in hits] == ["memory"]
    assert hits[0]["citation"] == f"memory:{memory['id']}:1-1"
    assert lexical[0]["source_key"] == f"memory:{memory['id']}"
    assert recall(alpha, "staging database") == ["The staging database moved to db-2 in November."]


# --- the scope matrix -------------------------------------------------------


@pytest.fixture
def bots():
    return {
        "alpha": api_client(name="alpha", bot_id="alpha"),
        "beta": api_client(name="beta", bot_id="beta"),
        "shared": api_client(name="shared", can_manage=True),  # writing shared takes a manage key (issue 39)
        "client_x": api_client(name="client x", client_id="client-x"),
        "ops": api_client(name="ops", channels="ops"),
    }


def test_a_bot_never_reads_changes_or_forgets_another_scopes_memory(bots):
    alpha_memory = indexed(remember(bots["alpha"], "Zebrafalcon rotates every quarter."))
    for other in ("beta", "shared", "client_x", "ops"):
        client = bots[other]
        path = f"/api/v1/memories/{alpha_memory['id']}"
        assert client.get(path).status_code == 404, other
        patched = client.patch(path, {"text": "overwritten"}, content_type="application/json")
        assert patched.status_code == 404, other
        assert client.delete(path).status_code == 404, other
        assert client.get("/api/v1/memories").json()["memories"] == [], other
        assert search(client, "zebrafalcon rotates quarter") == [], other
        assert recall(client, "zebrafalcon") == [], other
        superseding = client.post(
            "/api/v1/memories", {"text": "Replaced.", "supersedes": alpha_memory["id"]}, content_type="application/json"
        )
        assert superseding.status_code == 404, other
    assert Memory.objects.get(pk=alpha_memory["id"]).text == "Zebrafalcon rotates every quarter."
    assert bots["alpha"].get(f"/api/v1/memories/{alpha_memory['id']}").status_code == 200


def test_a_key_cannot_write_outside_its_own_scope(bots):
    cases = [
        ("alpha", {"bot_id": "beta"}, 403),
        ("alpha", {"client_id": "client-x"}, 403),
        ("ops", {"channels": ["night"]}, 403),
        ("ops", {"channels": []}, 403),  # ungated: every channel would read it
        ("shared", {"bot_id": "alpha"}, 403),
        ("shared", {"channels": ["ops"]}, 403),
    ]
    for name, scope, status in cases:
        response = bots[name].post("/api/v1/memories", {"text": "A fact.", **scope}, content_type="application/json")
        assert response.status_code == status, (name, scope, response.content)
        assert response.json()["data"]["field"] in ("bot_id", "client_id", "channels")
    assert not Memory.objects.exists()


def test_a_client_or_channel_key_writes_for_its_client_or_channel_and_others_of_it_read_it(bots):
    client_memory = indexed(remember(bots["client_x"], "Client x invoices on the first."))
    ops_memory = indexed(remember(bots["ops"], "The ops pager rotates on Mondays."))
    assert (client_memory["client_id"], ops_memory["channels"]) == ("client-x", ["ops"])

    colleague = api_client(name="client x, bot alpha", client_id="client-x", bot_id="alpha")
    night_and_ops = api_client(name="ops and night", channels="ops night")

    assert recall(colleague, "invoices") == ["Client x invoices on the first."]
    assert recall(night_and_ops, "pager rotates") == ["The ops pager rotates on Mondays."]
    assert recall(bots["alpha"], "invoices pager") == []


def test_a_shared_memory_is_read_by_every_bot_but_changed_only_by_a_caller_that_could_write_it(bots):
    shared = indexed(remember(bots["shared"], "The office closes at six."))
    path = f"/api/v1/memories/{shared['id']}"

    assert bots["alpha"].get(path).status_code == 200
    assert recall(bots["alpha"], "office closes") == ["The office closes at six."]
    refused = bots["alpha"].delete(path)
    assert refused.status_code == 403 and "may read memory" in refused.json()["error"]
    assert bots["shared"].delete(path).status_code == 204
    assert not Memory.objects.filter(pk=shared["id"]).exists()
    assert not Source.objects.filter(key=f"memory:{shared['id']}").exists()


def test_anonymous_callers_cannot_write_or_list_memories(settings, client):
    settings.RAG_ANONYMOUS_SEARCH = True
    assert client.post("/api/v1/memories", {"text": "x"}, content_type="application/json").status_code == 401
    assert client.get("/api/v1/memories").status_code == 401


def test_a_person_granted_several_bots_names_the_one_a_memory_is_for(client):
    from access.models import AccessGrant

    person = get_user_model().objects.create_user("dana", password="a-long-test-password")
    AccessGrant.objects.create(user=person, bot_id="alpha")
    AccessGrant.objects.create(user=person, bot_id="beta")
    client.force_login(person)

    unnamed = client.post("/api/v1/memories", {"text": "A fact."}, content_type="application/json")
    named = client.post("/api/v1/memories", {"text": "A fact.", "bot_id": "beta"}, content_type="application/json")

    assert unnamed.status_code == 422 and "name one with bot_id" in unnamed.json()["error"]
    assert named.status_code == 201 and named.json()["bot_id"] == "beta"
    assert named.json()["author"] == "user dana"


# --- bad input --------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": ""},
        {"text": "   "},
        {"text": "x" * 2001},
        {"text": "a\x00b"},
        {"text": 5},
        {"text": "ok", "expires_at": "2020-01-01T00:00:00Z"},
        {"text": "ok", "expires_at": "2030-01-01T00:00:00"},
        {"text": "ok", "expires_at": "tomorrow"},
        {"text": "ok", "supersedes": 0},
        {"text": "ok", "unknown_field": 1},
        ["text"],
    ],
)
def test_an_invalid_memory_is_refused_with_a_clear_422_and_nothing_is_stored(body):
    alpha = api_client(bot_id="alpha")
    response = alpha.post("/api/v1/memories", body, content_type="application/json")
    assert response.status_code == 422, (body, response.content)
    assert response.json()["error"]
    assert not Memory.objects.exists()


# --- supersede, expiry, approval --------------------------------------------


def test_a_new_fact_supersedes_an_old_one_which_is_kept_as_history_and_no_longer_served():
    alpha = api_client(bot_id="alpha")
    old = indexed(remember(alpha, "The staging database is on db-1."))
    new = indexed(remember(alpha, "The staging database moved to db-2.", supersedes=old["id"]))

    history = alpha.get(f"/api/v1/memories/{old['id']}").json()
    assert history["status"] == "superseded" and history["superseded_by"] == new["id"] and history["superseded_at"]
    assert new["supersedes"] == old["id"] and new["status"] == "active"
    assert recall(alpha, "staging database") == ["The staging database moved to db-2."]
    assert [h["source_key"] for h in search(alpha, "staging database db", sources=["memory"])] == [
        f"memory:{new['id']}"
    ]
    listed = alpha.get("/api/v1/memories?status=superseded").json()["memories"]
    assert [m["id"] for m in listed] == [old["id"]]
    again = alpha.post("/api/v1/memories", {"text": "db-3", "supersedes": old["id"]}, content_type="application/json")
    assert again.status_code == 409 and again.json()["data"]["current"] == new["id"]
    assert f"the current version is memory {new['id']}" in again.json()["detail"]
    # A chain: superseding the first of three versions names the last, the current one, not the next.
    newest = remember(alpha, "The staging database moved to db-3.", supersedes=new["id"])
    stale = alpha.post("/api/v1/memories", {"text": "db-4", "supersedes": old["id"]}, content_type="application/json")
    assert stale.status_code == 409, stale.content
    assert stale.json()["data"] == {"superseded_by": new["id"], "current": newest["id"]}
    assert f"memory {newest['id']}" in stale.json()["error"]


def test_patching_the_text_makes_a_new_version_and_other_fields_change_in_place():
    alpha = api_client(bot_id="alpha")
    memory = indexed(remember(alpha, "Deploys happen on Tuesdays.", conversation_id="c1"))
    path = f"/api/v1/memories/{memory['id']}"

    in_place = alpha.patch(path, {"citation": "calendar"}, content_type="application/json")
    versioned = alpha.patch(path, {"text": "Deploys happen on Thursdays."}, content_type="application/json")

    assert in_place.status_code == 200 and in_place.json()["citation"] == "calendar"
    assert versioned.status_code == 201
    new = versioned.json()
    assert new["supersedes"] == memory["id"] and new["conversation_id"] == "c1" and new["citation"] == "calendar"
    assert alpha.get(path).json()["status"] == "superseded"
    assert alpha.patch(path, {"citation": "x"}, content_type="application/json").status_code == 409
    assert alpha.patch(f"/api/v1/memories/{new['id']}", {}, content_type="application/json").status_code == 422
    assert (
        alpha.patch(f"/api/v1/memories/{new['id']}", {"text": None}, content_type="application/json").status_code == 422
    )


def test_an_expired_memory_is_not_served_but_its_row_stays_listed_as_expired():
    alpha = api_client(bot_id="alpha")
    in_an_hour = (timezone.now() + timedelta(hours=1)).isoformat()
    memory = indexed(remember(alpha, "The maintenance window is tonight.", expires_at=in_an_hour))
    assert recall(alpha, "maintenance window") == ["The maintenance window is tonight."]

    # The hour passes (moved back in the database: no test waits for a clock).
    past = timezone.now() - timedelta(seconds=1)
    Memory.objects.filter(pk=memory["id"]).update(expires_at=past)
    Source.objects.filter(memory__pk=memory["id"]).update(expires_at=past)

    assert recall(alpha, "maintenance window") == []
    assert search(alpha, "maintenance window tonight") == []
    assert alpha.get(f"/api/v1/memories/{memory['id']}").json()["status"] == "expired"
    assert [m["id"] for m in alpha.get("/api/v1/memories?status=expired").json()["memories"]] == [memory["id"]]
    assert alpha.get("/api/v1/memories").json()["memories"] == []


def test_with_approval_required_a_memory_waits_unserved_until_an_admin_approves_it(settings):
    from sources.memories import memory_approve

    settings.RAG_MEMORY_REQUIRE_APPROVAL = True
    alpha = api_client(bot_id="alpha")
    memory = indexed(remember(alpha, "Customers may pay by invoice."))

    assert memory["status"] == "pending"
    assert recall(alpha, "pay by invoice") == []
    assert [m["id"] for m in alpha.get("/api/v1/memories?status=pending").json()["memories"]] == [memory["id"]]

    assert memory_approve(memory_ids=[memory["id"]]) == 1

    assert recall(alpha, "pay by invoice") == ["Customers may pay by invoice."]
    assert alpha.get(f"/api/v1/memories/{memory['id']}").json()["status"] == "active"


def test_context_includes_memories_when_asked():
    alpha = api_client(bot_id="alpha")
    memory = indexed(remember(alpha, "The staging database moved to db-2."))
    body = {"query": "staging database", "budget_tokens": 500, "k": {"skill": 0, "file": 0, "tool": 0, "memory": 3}}

    context = alpha.post("/api/v1/context", body, content_type="application/json").json()
    without = alpha.post("/api/v1/context", {**body, "k": {"memory": 0}}, content_type="application/json").json()

    assert [part["citation"] for part in context["parts"]] == [f"memory:{memory['id']}:1-1"]
    assert context["parts"][0]["kind"] == "memory"
    assert "db-2" in context["text"]
    assert "db-2" not in without["text"]


def test_a_signed_in_person_finds_a_memory_of_a_bot_they_are_granted_on_the_page_by_its_kind(client):
    from access.models import AccessGrant

    alpha = api_client(bot_id="alpha")
    indexed(remember(alpha, "Quokkamemory: the staging database moved to db-2."))
    person = get_user_model().objects.create_user("erin", password="a-long-test-password")
    AccessGrant.objects.create(user=person, bot_id="alpha")
    client.force_login(person)

    page = client.get("/", {"q": "quokkamemory staging", "kind": "memory"}).content.decode()
    other = client.get("/", {"q": "quokkamemory staging", "kind": "tool"}).content.decode()

    assert "Quokkamemory: the staging database moved to db-2." in page and 'value="memory"' in page
    assert "Quokkamemory" not in other.split("</form>", 1)[-1]
