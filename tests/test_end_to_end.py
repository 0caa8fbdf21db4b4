"""A real Celery worker indexes what admins save; the API finds it."""

import json

import pytest
from django.contrib.auth import get_user_model

from sources.models import Chunk, IndexStatus, Skill
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def search(client, query: str) -> list[dict]:
    response = client.post("/api/v1/search", data=json.dumps({"query": query, "k": 5}), content_type="application/json")
    assert response.status_code == 200
    return response.json()["hits"]


def status(slug: str) -> str:
    return Skill.objects.get(slug=slug).index_status


def test_a_skill_saved_in_admin_is_indexed_by_the_worker_and_edits_replace_it(client, celery_worker):
    admin = get_user_model().objects.create_superuser("root", password="not-used-elsewhere-1")
    client.force_login(admin)
    body = (
        "# Runbook\n\n## Restore from backup\n\n"
        "Stop the service, then restore the zebrafish snapshot with pg_restore.\n"
    )
    response = client.post("/admin/sources/skill/add/", {"slug": "runbook", "title": "", "enabled": "on", "body": body})
    assert response.status_code == 302, response.content.decode()[:2000]

    wait_for(lambda: status("runbook") == IndexStatus.INDEXED, what="the worker to index the skill")
    hits = search(client, "how to restore the zebrafish snapshot")
    assert hits[0]["source_key"] == "skill:runbook"
    assert hits[0]["heading_path"] == "# Runbook > ## Restore from backup"

    skill = Skill.objects.get(slug="runbook")
    skill.body = "# Runbook\n\n## Rotate keys\n\nGenerate a new signing key every quarter.\n"
    skill.save()
    wait_for(
        lambda: not any("zebrafish" in h["content"] for h in search(client, "zebrafish snapshot")),
        what="the edit to replace the old chunks",
    )
    assert status("runbook") == IndexStatus.INDEXED
    assert search(client, "signing key rotation")[0]["heading_path"] == "# Runbook > ## Rotate keys"


def test_a_failure_is_reported_by_the_worker_and_old_chunks_stay(key_client, celery_worker):
    skill = Skill.objects.create(slug="guide", body="# Guide\n\nThe quokka procedure is documented here.\n")
    wait_for(lambda: status("guide") == IndexStatus.INDEXED, what="first index")
    skill.body = "---\ntitle: [unclosed\n---\n# Guide\n"
    skill.save()
    wait_for(lambda: status("guide") == IndexStatus.FAILED, what="the failure to be recorded")
    detail = key_client.get("/api/v1/skills/guide").json()
    assert "not valid YAML" in detail["last_error"]
    assert search(key_client, "quokka procedure")[0]["source_key"] == "skill:guide"


def test_the_skill_admin_re_embeds_an_unchanged_skill_only_when_forced(client, celery_worker):
    client.force_login(get_user_model().objects.create_superuser("boss", password="not-used-elsewhere-2"))
    skill = Skill.objects.create(slug="pager", body="# Pager\n\nEscalate to the ocelot rota after ten minutes.\n")
    wait_for(lambda: status("pager") == IndexStatus.INDEXED, what="first index")

    def chunk_ids() -> set[int]:
        return set(Chunk.objects.filter(source__skill=skill).values_list("pk", flat=True))

    def act(action: str) -> str:
        response = client.post("/admin/sources/skill/", {"action": action, "_selected_action": [skill.pk]}, follow=True)
        assert response.status_code == 200
        wait_for(lambda: status("pager") == IndexStatus.INDEXED, what=f"the worker to run {action}")
        return "\n".join(str(message) for message in response.context["messages"])

    first = chunk_ids()
    indexed_at = Skill.objects.get(pk=skill.pk).indexed_at
    assert "Queued 1 skill for indexing." in act("reindex")
    assert chunk_ids() == first and Skill.objects.get(pk=skill.pk).indexed_at == indexed_at  # unchanged: skipped

    assert "Queued 1 skill for re-embedding." in act("reindex_force")
    again = chunk_ids()
    assert len(again) == len(first) and not again & first  # replaced, not duplicated
    assert Skill.objects.get(pk=skill.pk).indexed_at > indexed_at
    assert search(client, "who do I escalate to")[0]["source_key"] == "skill:pager"
