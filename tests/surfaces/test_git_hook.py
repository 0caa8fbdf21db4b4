"""POST /api/v1/roots/{id}/hook (issue 25 item 1): a git host's push event, verified by the root's webhook secret,
queues a fetch job on the interactive queue; anything unsigned or wrongly signed is refused and queues nothing."""

import hashlib
import hmac
import json

import pytest
from django.test import Client

from sources import git_hooks
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from sources.queues import INTERACTIVE, job_queue

pytestmark = pytest.mark.django_db

BODY = json.dumps({"ref": "refs/heads/main", "after": "0" * 40}).encode()
NEXT_BODY = json.dumps({"ref": "refs/heads/main", "after": "1" * 40}).encode()  # the next push


@pytest.fixture
def root(tmp_path, settings) -> WorkspaceRoot:
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    return WorkspaceRoot.objects.create(name="repo", path=str(tmp_path), git_url="file:///nowhere/origin.git")


@pytest.fixture
def secret(root, settings) -> str:
    return git_hooks.webhook_rotate(root=root, secret_key=settings.SECRET_KEY)


def post(root: WorkspaceRoot, body: bytes = BODY, **headers: str):
    return Client().post(f"/api/v1/roots/{root.pk}/hook", body, content_type="application/json", headers=headers)


def signed(secret: str, body: bytes = BODY) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_a_github_push_signed_with_the_secret_queues_a_fetch_on_the_interactive_queue(root, secret):
    response = post(root, **{"X-Hub-Signature-256": f"sha256={signed(secret)}", "X-GitHub-Event": "push"})
    assert response.status_code == 202, response.content
    job = IndexJob.objects.get(pk=response.json()["job_id"])
    assert job.root_id == root.pk and job.trigger == "push" and job_queue(job) == INTERACTIVE


def test_gitlab_and_gitea_pushes_are_accepted_with_the_secret(root, secret):
    assert post(root, **{"X-Gitlab-Token": secret}).status_code == 202
    assert post(root, NEXT_BODY, **{"X-Gitea-Signature": signed(secret, NEXT_BODY)}).status_code == 202
    assert IndexJob.objects.filter(root=root).count() == 1  # the second joined the job already queued


def test_a_replayed_delivery_is_answered_without_a_job(root, secret):
    headers = {"X-Hub-Signature-256": f"sha256={signed(secret)}", "X-GitHub-Event": "push", "X-GitHub-Delivery": "d1"}
    assert post(root, **headers).status_code == 202
    IndexJob.objects.update(status=JobStatus.SUCCEEDED)  # the fetch ran: a new push would queue another job
    # The delivery id is not signed: a replayer may change it or leave it out; the signed body gives it away.
    for delivery in ("d1", "d2", ""):
        replay = post(root, **{**headers, "X-GitHub-Delivery": delivery})
        assert replay.status_code == 200 and replay.json() == {"job_id": None, "status": "replay"}
    assert IndexJob.objects.count() == 1
    next_push = {"X-Hub-Signature-256": f"sha256={signed(secret, NEXT_BODY)}", "X-GitHub-Delivery": "d3"}
    assert post(root, NEXT_BODY, **next_push).status_code == 202
    assert IndexJob.objects.count() == 2


def test_a_gitlab_delivery_id_seen_before_is_a_replay(root, secret):
    assert post(root, **{"X-Gitlab-Token": secret, "X-Gitlab-Event-UUID": "u-1"}).status_code == 202
    IndexJob.objects.update(status=JobStatus.SUCCEEDED)
    assert post(root, NEXT_BODY, **{"X-Gitlab-Token": secret, "X-Gitlab-Event-UUID": "u-1"}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"X-Hub-Signature-256": "sha256=" + "0" * 64},
        {"X-Hub-Signature-256": "not-a-signature"},
        {"X-Gitlab-Token": "wrong-token"},
        {"X-Gitea-Signature": "0" * 64},
    ],
    ids=["unsigned", "github-wrong", "github-garbled", "gitlab-wrong", "gitea-wrong"],
)
def test_an_unsigned_or_wrongly_signed_push_is_refused_and_queues_nothing(root, secret, headers):
    response = post(root, **headers)
    assert response.status_code == 401
    assert not IndexJob.objects.exists()


def test_a_root_without_a_secret_accepts_no_push(root):
    assert post(root, **{"X-Gitlab-Token": ""}).status_code == 401
    assert not IndexJob.objects.exists()


def test_rotating_the_secret_revokes_the_old_one(root, secret, settings):
    git_hooks.webhook_rotate(root=root, secret_key=settings.SECRET_KEY)
    assert post(root, **{"X-Gitlab-Token": secret}).status_code == 401


def test_a_directory_root_has_no_hook(root, secret):
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url="")
    assert post(root, **{"X-Gitlab-Token": secret}).status_code == 401
