"""manage.py rag_search: the API's hybrid search from a shell, as an API key's scope or a superuser's."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from access.keys import api_key_create, api_key_revoke
from sources import services
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def skills():
    shared = SkillFactory(slug="otter-care", body="# Otter care\n\nFeed the river otters fresh fish twice a day.\n")
    private = SkillFactory(
        slug="otter-secrets", bot_id="b1", body="# Otter secrets\n\nThe otters hide their fish under the bridge.\n"
    )
    for skill in (shared, private):
        services.skill_index(skill_id=skill.pk)
    return shared, private


def run(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("rag_search", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_as_a_key_it_sees_what_the_key_sees_and_prints_ranked_hits_with_citations(skills):
    key, _ = api_key_create(name="shared bot")
    out, err = run("otters fish", "--as", key.prefix)
    assert out.startswith("  1. skill:otter-care:") and "Feed the river otters" in out
    assert "otter-secrets" not in out
    assert "superuser" not in err


def test_without_a_key_it_searches_everything_and_says_so(skills):
    out, err = run("otters fish", "--k", "5")
    assert "skill:otter-care:" in out and "skill:otter-secrets:" in out
    assert "as a superuser" in err


def test_json_is_the_api_s_response_body_for_the_same_key(skills):
    key, raw = api_key_create(name="bot one", bot_id="b1")
    body = {"query": "where do otters hide fish", "k": 3}
    api = Client(headers={"Authorization": f"Bearer {raw}"}).post(
        "/api/v1/search", data=json.dumps(body), content_type="application/json"
    )
    assert api.status_code == 200
    out, _ = run(body["query"], "--k", "3", "--json", "--as", key.prefix)
    assert json.loads(out) == api.json()
    assert {hit["citation"].split(":")[1] for hit in json.loads(out)["hits"]} == {"otter-care", "otter-secrets"}


def test_an_unknown_or_revoked_key_prefix_is_a_clear_error(skills):
    with pytest.raises(CommandError, match=r"no API key has the prefix 'nokey' \(manage.py rag_apikey list"):
        run("otters", "--as", "nokey")
    key, _ = api_key_create(name="old bot")
    api_key_revoke(prefix=key.prefix)
    with pytest.raises(CommandError, match="revoked or expired"):
        run("otters", "--as", key.prefix)


def test_a_bad_k_or_an_empty_query_is_refused_with_the_field_named(skills):
    with pytest.raises(CommandError, match="^k: "):
        run("otters", "--k", "0")
    with pytest.raises(CommandError, match="^query: "):
        run("   ")
