"""A skill's or tool's new scope applies to search the moment it is saved, without re-embedding."""

import pytest

from access.scope import Scope
from retrieval.search import Mode, chunks_search
from sources import services, tools
from sources.models import Chunk, Skill, Tool

pytestmark = pytest.mark.django_db


def keys(scope: Scope, query: str = "narwhal") -> set[str]:
    return {hit.chunk.source.key for hit in chunks_search(query=query, mode=Mode.LEXICAL, scope=scope)}


def test_a_skill_rescoped_in_the_admin_moves_at_once_and_keeps_its_vectors(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    body = "# Narwhal\n\nFeeding the narwhal twice a day.\n"
    response = client.post(
        "/admin/sources/skill/add/",
        {"slug": "narwhal", "title": "", "enabled": "on", "body": body, "bot_id": "", "client_id": "", "channels": ""},
    )
    assert response.status_code == 302
    skill = Skill.objects.get(slug="narwhal")
    services.skill_index(skill_id=skill.pk)
    chunk_ids = set(Chunk.objects.values_list("pk", flat=True))
    assert keys(Scope()) == {"skill:narwhal"}

    response = client.post(
        f"/admin/sources/skill/{skill.pk}/change/",
        {
            "slug": "narwhal",
            "title": "",
            "enabled": "on",
            "body": body,
            "bot_id": "alpha",
            "client_id": "",
            "channels": "zoo, night",
        },
    )
    assert response.status_code == 302
    # Saved, no job run: the shared scope no longer sees it; alpha on a granted channel does.
    assert keys(Scope()) == set() and keys(Scope(bot_ids=("alpha",))) == set()
    assert keys(Scope(bot_ids=("alpha",), channels=("night",))) == {"skill:narwhal"}
    assert services.skill_index(skill_id=skill.pk).skipped  # the scope is not part of what is embedded
    assert set(Chunk.objects.values_list("pk", flat=True)) == chunk_ids


def test_the_admin_refuses_scope_names_that_could_not_match_a_caller(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    response = client.post(
        "/admin/sources/skill/add/",
        {
            "slug": "x",
            "title": "",
            "enabled": "on",
            "body": "# X\n",
            "bot_id": "two words",
            "client_id": "",
            "channels": "ok bad/name",
        },
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"bot_id", "channels"}


def test_a_tool_rescoped_or_renamed_leaves_no_copy_under_its_old_scope():
    tool = Tool.objects.create(name="feed_narwhal", description="Feed the narwhal.")
    tools.tool_index(tool_id=tool.pk)
    assert keys(Scope()) == {"tool:local:feed_narwhal"}
    tool.bot_id = "beta"
    tool.save()
    assert keys(Scope()) == set() and keys(Scope(bot_ids=("beta",))) == {"tool:local:feed_narwhal"}
    tool.name = "feed_narwhal_now"
    tool.save()
    tools.tool_index(tool_id=tool.pk)
    assert keys(Scope()) == set() and keys(Scope(bot_ids=("beta",))) == {"tool:local:feed_narwhal_now"}
