"""Issue 23 item 1: API keys and access grants moved from the retrieval app to the access app, and a database
created before the move (main at 6ae40bd: retrieval 0003, no access app) keeps working after `migrate`:
the same key authenticates with the same scope, grants still scope people, and the permissions given to
people (the console's named ones included) are still theirs, now under the access app's label."""

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType

from access.identity import identity_for_key, identity_for_user, scope_for
from access.keys import api_key_authenticate
from access.models import AccessGrant, ApiKey
from sources import services
from tests.factories import SkillFactory
from tests.migrating import migrate

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("retrieval", "0003_console_permissions"), ("access", None)]
# A key as main issued it before the move: `rag_<prefix>_<secret>`, stored as its prefix and SHA-256.
RAW_KEY = "rag_0a1b2c3d_cHJlLWFjY2Vzcy1hcHAga2V5LTIwMjYxMTI0"
KEY_HASH = "72753accce99521aa83de87fa986eebea82b6fcc96523f8b0130cc1645412d79"


def test_keys_grants_and_permissions_made_before_the_move_keep_working(client):
    old = migrate(BEFORE)
    try:
        OldUser, OldPermission = old.get_model("auth", "User"), old.get_model("auth", "Permission")
        OldKey, OldGrant = old.get_model("retrieval", "ApiKey"), old.get_model("retrieval", "AccessGrant")
        person = OldUser.objects.create(username="ops", is_staff=True)
        person.user_permissions.add(
            OldPermission.objects.get(content_type__app_label="retrieval", codename="view_index_overview"),
            OldPermission.objects.get(content_type__app_label="retrieval", codename="view_apikey"),
        )
        OldGrant.objects.create(user=person, bot_id="alpha")
        OldKey.objects.create(name="ci bot", prefix="0a1b2c3d", key_hash=KEY_HASH, bot_id="alpha")
    finally:
        migrate()

    # Nothing is left under the old label, and nothing was duplicated under the new one.
    assert not ContentType.objects.filter(app_label="retrieval", model__in=["apikey", "accessgrant"]).exists()
    assert ContentType.objects.filter(app_label="access", model__in=["apikey", "accessgrant"]).count() == 2
    assert Permission.objects.filter(codename="view_index_overview").count() == 1
    person = User.objects.get(username="ops")
    assert person.has_perm("access.view_index_overview") and person.has_perm("access.view_apikey")
    assert not person.has_perm("access.use_try_search")

    key = api_key_authenticate(RAW_KEY)
    assert (key.pk, key.bot_id) == (ApiKey.objects.get(prefix="0a1b2c3d").pk, "alpha")
    assert AccessGrant.objects.get(user=person).bot_id == "alpha"
    assert scope_for(identity_for_key(key)).bot_ids == scope_for(identity_for_user(person)).bot_ids

    for slug, bot in (("alpha-runbook", "alpha"), ("beta-runbook", "beta")):
        services.skill_index(skill_id=SkillFactory(slug=slug, bot_id=bot, body=f"# {slug}\n\nRotate the keys.\n").pk)
    answer = client.post(
        "/api/v1/search",
        {"query": "rotate the keys", "mode": "lexical"},
        content_type="application/json",
        headers={"authorization": f"Bearer {RAW_KEY}"},
    )
    assert answer.status_code == 200, answer.content
    assert {hit["source_key"] for hit in answer.json()["hits"]} == {"skill:alpha-runbook"}
