"""End to end with a real Celery worker (issue 25 item 1): a commit pushed to a local bare repository, announced by
a signed webhook, becomes searchable; the old text leaves search."""

import hashlib
import hmac
import json

import pytest
from django.conf import settings as django_settings
from django.test import Client

from sources import git_hooks, git_roots
from sources.config import git_config
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from tests.conftest import running_worker, wait_for
from tests.gitrepo import Origin

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def search(client, query: str) -> list[dict]:
    response = client.post("/api/v1/search", {"query": query, "k": 5}, content_type="application/json")
    assert response.status_code == 200
    return response.json()["hits"]


def test_a_pushed_commit_announced_by_the_webhook_becomes_searchable(tmp_path, key_client, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]  # the worker is told these too: the file:// remote is under them
    origin = Origin(tmp_path / "remote")
    origin.commit("first", {"docs/ops.md": "# Ops\n\nRestart the walrus daemon every Monday.\n"})
    origin.push()
    root = WorkspaceRoot.objects.create(
        name="repo", path=git_roots.root_git_path(name="repo", config=git_config()), git_url=origin.url
    )
    secret = git_hooks.webhook_rotate(root=root, secret_key=django_settings.SECRET_KEY)

    def push_event() -> int:
        # As a host sends it: each push's body names its new commit (a body seen before is a replay, no job).
        body = json.dumps({"ref": "refs/heads/main", "after": origin.git("rev-parse", "HEAD")}).encode()
        signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        response = Client().post(
            f"/api/v1/roots/{root.pk}/hook",
            body,
            content_type="application/json",
            headers={"X-Hub-Signature-256": signature, "X-GitHub-Event": "push"},
        )
        assert response.status_code == 202, response.content
        return response.json()["job_id"]

    with running_worker("git-worker"):
        first = push_event()  # never indexed: handed to the bulk queue, cloned and read in full
        wait_for(lambda: IndexJob.objects.get(pk=first).status == JobStatus.SUCCEEDED, what="the first index")
        assert search(key_client, "walrus daemon restart")[0]["path"] == "docs/ops.md"
        tip = origin.commit("edit", {"docs/ops.md": "# Ops\n\nFeed the pelican before the release.\n"})
        origin.push()
        job_id = push_event()
        wait_for(lambda: IndexJob.objects.get(pk=job_id).status == JobStatus.SUCCEEDED, what="the pushed commit")
        hit = search(key_client, "feed the pelican")[0]
        assert hit["path"] == "docs/ops.md" and hit["commit"] == tip and "pelican" in hit["content"]
        assert not any("walrus" in h["content"] for h in search(key_client, "walrus daemon restart"))
        assert IndexJob.objects.get(pk=job_id).paths == ["docs/ops.md"]
