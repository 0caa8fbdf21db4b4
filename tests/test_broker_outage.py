"""A real broker outage: reported while it lasts, healed when it ends, with nothing lost."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sources.models import IndexJob, IndexStatus, JobStatus, Skill, Tool, WorkspaceRoot
from sources.queueing import BROKER_WAIT
from tests.conftest import broker_outage, running_worker, wait_for
from tests.tree import tree_make

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_what_is_saved_while_the_broker_is_down_waits_and_is_indexed_once_it_is_back(tmp_path, settings, manage_client):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    tree_make(tmp_path / "repo", files=5)
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", password="not-used-elsewhere-1"))
    anonymous = Client()

    with running_worker("outage-worker"):
        assert anonymous.get("/api/v1/health").status_code == 200
        with broker_outage():
            down = anonymous.get("/api/v1/health")
            assert down.status_code == 503
            assert down.json()["checks"]["broker"] == {"ok": False}  # no host, port or error text for anyone
            assert down.json()["checks"]["database"] == {"ok": True}
            assert (
                "refused" in manage_client.get("/api/v1/health").json()["checks"]["broker"]["details"]["error"].lower()
            )

            saved = admin.post(
                "/admin/sources/skill/add/",
                {
                    "slug": "failover",
                    "title": "",
                    "enabled": "on",
                    "body": "# Failover\n\nPromote the axolotl replica first.\n",
                },
                follow=True,
            )
            assert "The broker (Redis) cannot be reached" in saved.content.decode()
            skill = Skill.objects.get(slug="failover")
            assert skill.index_status == IndexStatus.QUEUED and skill.last_error.startswith(BROKER_WAIT)

            reindex = manage_client.post(
                f"/api/v1/roots/{root.pk}/reindex", data=json.dumps({"force": True}), content_type="application/json"
            )
            assert reindex.status_code == 202  # accepted, and it will run: it is queued, not failed
            job = reindex.json()["job"]
            assert job["status"] == "queued" and job["message"].startswith(BROKER_WAIT)

        # Back: the worker reconnects and sends what waited (beat is not running here).
        wait_for(
            lambda: Skill.objects.get(slug="failover").index_status == IndexStatus.INDEXED,
            timeout=180,
            what="the skill saved during the outage to be indexed",
        )
        wait_for(
            lambda: IndexJob.objects.get(pk=job["id"]).status == JobStatus.SUCCEEDED,
            timeout=180,
            what="the job requested during the outage to run",
        )
        assert Skill.objects.get(slug="failover").last_error == ""
        up = anonymous.get("/api/v1/health")
        assert up.status_code == 200 and up.json()["checks"]["broker"] == {"ok": True}


def test_the_sweep_beat_runs_sends_what_waited_once_the_broker_answers():
    from sources.tasks import recovery_sweep

    with broker_outage():
        skill = Skill.objects.create(slug="waits", body="# Waits\n\nFor the broker.\n")
        tool = Tool.objects.create(name="page_oncall", description="Page whoever is on call.")
        assert recovery_sweep()["jobs_handed_on"] == []  # the database answers; sending does not
        for item in (skill, tool):
            item.refresh_from_db()
            assert item.index_status == IndexStatus.QUEUED and item.last_error.startswith(BROKER_WAIT)
    sent = recovery_sweep()
    assert (sent["skill"], sent["tool"]) == ([skill.pk], [tool.pk])
    assert Skill.objects.get(pk=skill.pk).last_error == Tool.objects.get(pk=tool.pk).last_error == ""
    assert "skill" not in recovery_sweep()  # sent once
