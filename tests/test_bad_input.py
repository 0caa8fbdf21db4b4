"""Bad input gets a clear 4xx (JSON under /api/), never a 5xx; costly input is bounded."""

import json
import threading

import psycopg
import pytest
from django.db import connection
from django.test import Client

from access.scope import Scope
from kernel.errors import ApplicationError, Unavailable
from retrieval.search import Mode, chunks_search
from sources import services
from sources.models import IndexStatus, Skill
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db

BOMB = (
    "---\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdef", "bcdefg", strict=True))
    + "---\n# Bomb\n"
)


def post(client: Client, path: str, payload: dict | str):
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return client.post(path, data=data, content_type="application/json")


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        ("/api/v1/search", {"query": "nul\u0000here"}, "query"),
        ("/api/v1/search", {"query": "bell\u0007"}, "query"),
        ("/api/v1/search", {"query": "   "}, "query"),
        ("/api/v1/search", {"query": "x", "bot_id": "a\u0000"}, "bot_id"),
        ("/api/v1/search", {"query": "x", "client_id": "a\u0000"}, "client_id"),
        ("/api/v1/search", {"query": "x", "channels": ["ops\u0000"]}, "channels.0"),
        ("/api/v1/skills/search", {"query": "\u0000"}, "query"),
        ("/api/v1/tools/search", {"query": "tool\u0000"}, "query"),
    ],
)
def test_nul_control_characters_and_blank_text_in_a_body_get_422_naming_the_field(key_client, path, payload, field):
    response = post(key_client, path, payload)
    assert response.status_code == 422, response.content
    assert any(message.startswith(f"{field}:") for message in response.json()["errors"])


@pytest.mark.parametrize(
    "url", ["/api/v1/skills/%00", "/api/v1/skills/a%01b", "/api/v1/skills?x=%00", "/api/v1/index-jobs/1?%00=1"]
)
def test_nul_in_a_path_or_query_string_gets_a_json_400(key_client, url):
    response = key_client.get(url)
    assert response.status_code == 400
    assert "control character" in response.json()["error"]


def test_nul_in_the_admin_and_the_page_gets_400_not_500(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    assert client.get("/admin/sources/skill/", {"index_status__exact": "\x00"}).status_code == 400
    assert client.get("/admin/sources/skill/", {"q": "a\x00b"}).status_code == 400
    assert client.get("/", {"q": "\x00"}).status_code == 400


def test_unknown_api_paths_and_oversized_bodies_answer_json(key_client, settings):
    missing = key_client.get("/api/v1/nothing-here")
    assert missing.status_code == 404 and "no such endpoint" in missing.json()["error"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    big = post(key_client, "/api/v1/search", {"query": "x", "pad": "y" * 2000})
    assert big.status_code == 413 and big.json()["error"] == "the request body is too large"


def test_the_api_docs_work_offline(client):
    page = client.get("/api/docs").content.decode()
    assert "cdn." not in page and "unpkg" not in page
    assert "/static/ninja/swagger-ui-bundle.js" in page
    assert client.get("/static/ninja/swagger-ui-bundle.js").status_code == 200


def test_every_api_error_answer_is_documented(client):
    schema = client.get("/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert {"401", "403", "429"} <= codes or path == "/api/v1/health", (method, path, codes)
            if operation.get("requestBody"):
                assert "422" in codes, (method, path)


def test_a_yaml_alias_bomb_is_refused_fast_with_a_reason(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    response = client.post(
        "/admin/sources/skill/add/",
        {"slug": "bomb", "title": "", "enabled": "on", "body": BOMB, "bot_id": "", "client_id": "", "channels": ""},
    )
    assert response.status_code == 200
    assert "aliases" in str(response.context["adminform"].form.errors["body"])
    skill = SkillFactory(slug="bomb", body=BOMB)  # saved around the form: the indexer refuses it too
    with pytest.raises(services.IndexingError, match="aliases"):
        services.skill_index(skill_id=skill.pk)
    assert Skill.objects.get(pk=skill.pk).index_status != IndexStatus.INDEXED


def test_the_lexical_channel_reads_only_the_first_words_of_a_long_query(settings):
    services.skill_index(
        skill_id=SkillFactory(slug="otter", body="# Otter\n\nThe otter holds hands while sleeping.\n").pk
    )
    filler = " ".join(f"filler{n}" for n in range(settings.RAG_LEXICAL_MAX_WORDS))
    assert chunks_search(query="otter " + filler, mode=Mode.LEXICAL)
    assert not chunks_search(query=filler + " otter", mode=Mode.LEXICAL)


@pytest.mark.django_db(transaction=True)  # committed rows: the blocking session must not wait on the test's own locks
def test_a_search_channel_that_runs_too_long_is_cancelled_and_named(settings):
    services.skill_index(
        skill_id=SkillFactory(slug="otter", body="# Otter\n\nThe otter holds hands while sleeping.\n").pk
    )
    settings.RAG_SEARCH_STATEMENT_TIMEOUT_MS = 200
    # Another session holds the lexical postings: the search waits on them until its statement timeout fires.
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    with psycopg.connect(**params, autocommit=False) as blocker:
        blocker.execute("SET lock_timeout = '10s'")  # a mistake here fails the test instead of hanging it
        blocker.execute("LOCK TABLE retrieval_posting IN ACCESS EXCLUSIVE MODE")
        release = threading.Timer(30, blocker.close)  # without a statement timeout the search would wait forever
        release.start()
        try:
            with pytest.raises(ApplicationError) as failure:
                chunks_search(query="otter", mode=Mode.LEXICAL, scope=Scope())
        finally:
            release.cancel()
        blocker.rollback()
    assert "RAG_SEARCH_STATEMENT_TIMEOUT_MS (200 ms)" in failure.value.message
    assert isinstance(failure.value, Unavailable)  # "try again" with the reason, not a 500
    # An object, like every application error's details (the API's "detail"): each failed channel's reason.
    assert failure.value.details == {"channels": [failure.value.message.removeprefix("search failed: ")]}
    assert chunks_search(query="otter", mode=Mode.LEXICAL)  # the timeout did not outlive the channel
