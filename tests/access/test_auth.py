"""API keys, sessions with CSRF, anonymous access and rate limits, on the real API and Redis."""

import hashlib
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from access.keys import api_key_create
from access.models import ApiKey

pytestmark = pytest.mark.django_db


def search(client: Client, **headers):
    return client.post(
        "/api/v1/search", data=json.dumps({"query": "anything"}), content_type="application/json", headers=headers
    )


def bearer(raw: str) -> dict:
    return {"Authorization": f"Bearer {raw}"}


def test_the_command_prints_the_key_once_and_stores_only_its_hash(capsys):
    call_command(
        "rag_apikey",
        "create",
        "support-bot",
        "--bot-id",
        "alpha",
        "--channel",
        "ops",
        "--channel",
        "support",
        "--manage",
    )
    out, err = capsys.readouterr()
    raw = out.strip()
    key = ApiKey.objects.get(name="support-bot")
    assert raw.startswith(f"rag_{key.prefix}_") and "shown once" in err
    assert key.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw not in json.dumps(list(ApiKey.objects.values()), default=str)  # never stored
    assert (key.bot_id, key.channels, key.can_manage) == ("alpha", "ops support", True)
    assert search(Client(), **bearer(raw)).status_code == 200

    call_command("rag_apikey", "list")
    listed = capsys.readouterr().out
    assert key.prefix in listed and "bot alpha" in listed and raw not in listed
    call_command("rag_apikey", "revoke", key.prefix)
    assert search(Client(), **bearer(raw)).status_code == 401


def test_the_command_refuses_a_bad_scope_name():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="bot_id"):
        call_command("rag_apikey", "create", "x", "--bot-id", "has space")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "authentication required"),
        ("Bearer rag_nothing_here", "invalid API key"),
        ("Bearer ", "must be 'Bearer <API key>'"),
        ("Token abc", "must be 'Bearer <API key>'"),
        ("Bearer not-even-our-format", "invalid API key"),
    ],
)
def test_missing_or_bad_credentials_get_401(header, message):
    response = search(Client(), **({"Authorization": header} if header else {}))
    assert response.status_code == 401
    assert message in response.json()["error"]
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_or_expired_key_is_refused_and_last_use_is_recorded():
    key, raw = api_key_create(name="bot")
    assert key.last_used_at is None
    assert search(Client(), **bearer(raw)).status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None
    ApiKey.objects.filter(pk=key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert "expired" in search(Client(), **bearer(raw)).json()["error"]
    ApiKey.objects.filter(pk=key.pk).update(expires_at=None, revoked_at=timezone.now())
    assert "revoked" in search(Client(), **bearer(raw)).json()["error"]
    # The right prefix with a wrong secret is no key at all.
    assert search(Client(), **bearer(raw[:-3] + "xyz")).json()["error"] == "invalid API key"


def test_anonymous_search_follows_the_setting(settings):
    settings.RAG_ANONYMOUS_SEARCH = False
    assert search(Client()).status_code == 401
    settings.RAG_ANONYMOUS_SEARCH = True
    settings.RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE = 0
    assert search(Client()).status_code == 200
    # Managing endpoints never take anonymous callers.
    assert Client().get("/api/v1/roots").status_code == 401


def test_a_signed_in_session_needs_the_csrf_token_for_unsafe_methods(django_user_model):
    user = django_user_model.objects.create_user("person", password="a-long-test-password")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    refused = search(client)
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]
    assert client.get("/api/v1/skills").status_code == 200  # safe methods need no token
    client.get("/")  # the page's sign-out form sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    assert search(client, **{"X-CSRFToken": token}).status_code == 200


def test_a_cross_site_text_plain_post_cannot_queue_a_job():
    # What a form on another site can send: no Authorization header, text/plain body.
    response = Client().post("/api/v1/roots/1/reindex", data='{"force": true}', content_type="text/plain")
    assert response.status_code == 401


def test_the_rate_limit_is_shared_by_every_client_of_a_key_and_says_when_to_retry(settings):
    _, raw = api_key_create(name="chatty", rate_limit_per_minute=3)
    first, second, third = Client(), Client(), Client()  # think: three web workers, one Redis
    # A sliding minute: three served, whichever client sends them, then every request of that minute is refused,
    # although no client sends more than three (a fixed window let a run across a minute's boundary through twice).
    answers = [search(client, **bearer(raw)) for client in (first, second, third) * 2 + (first,)]
    codes = [answer.status_code for answer in answers]
    assert codes == [200] * 3 + [429] * 4, codes
    refused = next(answer for answer in answers if answer.status_code == 429)
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "3 requests per minute" in refused.json()["error"]
    # Another key has its own budget; 0 means no limit.
    _, other = api_key_create(name="quiet", rate_limit_per_minute=0)
    assert all(search(first, **bearer(other)).status_code == 200 for _ in range(5))


def test_the_admin_shows_a_new_key_once(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    response = client.post(
        "/admin/access/apikey/add/", {"name": "ci bot", "bot_id": "alpha", "client_id": "", "channels": ""}
    )
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    key = ApiKey.objects.get(name="ci bot")
    page = response.content.decode()
    raw = page.split(f'value="rag_{key.prefix}_', 1)[1].split('"', 1)[0]
    raw = f"rag_{key.prefix}_{raw}"
    assert "cannot be shown again" in page
    assert hashlib.sha256(raw.encode()).hexdigest() == key.key_hash
    assert raw not in client.get(f"/admin/access/apikey/{key.pk}/change/").content.decode()
    assert raw not in client.get("/admin/access/apikey/").content.decode()
    assert search(Client(), **bearer(raw)).status_code == 200


def test_the_openapi_schema_documents_the_security_schemes_and_error_answers(client):
    schema = client.get("/api/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert {"type": "http", "scheme": "bearer"}.items() <= schemes["ApiKeyAuth"].items()
    assert schemes["SessionAuth"]["in"] == "cookie"
    search_answers = schema["paths"]["/api/v1/search"]["post"]["responses"]
    assert {"401", "403", "429"} <= set(search_answers)
    reindex = schema["paths"]["/api/v1/roots/{root_id}/reindex"]["post"]
    assert {"401", "403", "429"} <= set(reindex["responses"])
    assert {name for item in reindex["security"] for name in item} == {"ApiKeyAuth", "SessionAuth"}


def test_grants_are_edited_on_the_user_and_group_pages(client, django_user_model):
    from django.contrib.auth.models import Group

    from access.identity import identity_for_user

    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    person = django_user_model.objects.create_user("person", password="a-long-test-password")
    team = Group.objects.create(name="support")
    person.groups.add(team)
    assert "Search access" in client.get(f"/admin/auth/user/{person.pk}/change/").content.decode()
    page = client.get(f"/admin/auth/group/{team.pk}/change/")
    assert "Search access" in page.content.decode()
    form = {
        "name": "support",
        "access_grants-TOTAL_FORMS": "1",
        "access_grants-INITIAL_FORMS": "0",
        "access_grants-0-bot_id": "",
        "access_grants-0-client_id": "client-x",
        "access_grants-0-channels": "support, ops",
    }
    assert client.post(f"/admin/auth/group/{team.pk}/change/", form).status_code == 302
    identity = identity_for_user(person)
    assert (identity.client_ids, identity.channels, identity.rights) == ({"client-x"}, {"support", "ops"}, frozenset())


def test_grant_and_key_forms_suggest_the_names_in_use_and_warn_about_a_new_one(client, django_user_model):
    """A typo in a grant ("alpah") used to grant nothing, silently."""
    from sources import services
    from tests.factories import SkillFactory

    services.skill_index(skill_id=SkillFactory(slug="runbook", bot_id="alpha", channels="ops vip").pk)
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    person = django_user_model.objects.create_user("person", password="a-long-test-password")
    page = client.get(f"/admin/auth/user/{person.pk}/change/").content.decode()
    assert 'list="id_access_grants-__prefix__-bot_id-names"' in page  # the row "Add another" copies
    assert '<datalist id="id_access_grants-__prefix__-bot_id-names"><option value="alpha"></datalist>' in page
    assert '<option value="ops"><option value="vip">' in page
    # The grants sit right after the account's name and password, above the permission lists.
    assert page.index("Search access") < page.index("Permissions")
    key_page = client.get("/admin/access/apikey/add/").content.decode()
    assert 'list="id_bot_id-names"' in key_page and '<datalist id="id_bot_id-names"><option value="alpha">' in key_page
    assert "shared with every bot" not in key_page  # the sources' wording says the opposite of what a key does

    saved = client.post(
        "/admin/access/apikey/add/", {"name": "typo bot", "bot_id": "alpah", "client_id": "", "channels": "ops"}
    )
    assert saved.status_code == 200 and ApiKey.objects.filter(name="typo bot", bot_id="alpah").exists()
    shown = saved.content.decode()  # the page that shows the new key once shows the warning too
    assert "No source is given to bot “alpah” yet" in shown and "Bots in use: alpha." in shown
    form = {
        "username": "person",
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "access_grants-TOTAL_FORMS": "1",
        "access_grants-INITIAL_FORMS": "0",
        "access_grants-0-bot_id": "alpha",
        "access_grants-0-client_id": "",
        "access_grants-0-channels": "ops",
        "oidc_identities-TOTAL_FORMS": "0",  # the single sign-on identities' inline, beside the grants
        "oidc_identities-INITIAL_FORMS": "0",
    }
    response = client.post(f"/admin/auth/user/{person.pk}/change/", form, follow=True)
    assert response.status_code == 200 and person.access_grants.filter(bot_id="alpha").exists()
    assert not [m for m in response.context["messages"] if "No source is given" in str(m)]  # names in use: no warning


def test_a_user_page_with_many_grants_reads_the_names_in_use_once(client, django_user_model):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from access.models import AccessGrant

    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    person = django_user_model.objects.create_user("person", password="a-long-test-password")
    for number in range(4):
        AccessGrant.objects.create(user=person, bot_id=f"bot-{number}")
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/admin/auth/user/{person.pk}/change/").content.decode()
    bot_lists = re.findall(r'<datalist id="id_access_grants-[^"]*-bot_id-names">', page)
    assert len(bot_lists) == 5  # four grants and the row "Add another" copies
    distinct_names = [q["sql"] for q in queries if "DISTINCT" in q["sql"] and "sources_source" in q["sql"]]
    assert len(distinct_names) == 3  # bots, clients, channels: once for the page, not once per grant row
