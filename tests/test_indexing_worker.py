"""Index jobs on real Celery workers: through the API, and through a SIGKILL."""

import json
import os
import shutil
import signal

import pytest
from django.db.models import Count

from sources import jobs, locks, pipeline, tasks
from sources.models import Chunk, IndexJob, JobStatus, WorkspaceRoot
from tests.conftest import running_worker, wait_for
from tests.tree import tree_make

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


@pytest.fixture
def base(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    return tmp_path


def job_json(client, job_id: int) -> dict:
    return client.get(f"/api/v1/index-jobs/{job_id}").json()


def index_rows(root: WorkspaceRoot) -> list[tuple]:
    return sorted(
        Chunk.objects.filter(source__key=f"root:{root.pk}").values_list(
            "path", "chunk_index", "content_hash", "start_line", "end_line"
        )
    )


def test_a_reindex_requested_through_the_api_runs_on_the_worker(manage_client, base):
    client = manage_client
    directory = base / "repo"
    tree_make(directory, files=40)
    (directory / "blob.py").write_bytes(b"\x00\x00binary")
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory))
    with running_worker("api-worker"):
        first = client.post(
            f"/api/v1/roots/{root.pk}/reindex", data=json.dumps({"force": False}), content_type="application/json"
        )
        assert first.status_code == 202
        job_id = first.json()["job"]["id"]
        again = client.post(
            f"/api/v1/roots/{root.pk}/reindex", data=json.dumps({"force": True}), content_type="application/json"
        )
        if job_json(client, job_id)["status"] in ("queued", "running"):
            assert again.status_code == 200 and again.json() == {"created": False, "job": again.json()["job"]}
            assert again.json()["job"]["id"] == job_id
        done = wait_for(
            lambda: (j := job_json(client, job_id))["status"] in ("succeeded", "failed") and j, what="the job"
        )
    assert done["status"] == "succeeded", done["message"]
    assert (done["files_total"], done["files_changed"], done["files_skipped"], done["progress"]) == (41, 40, 1, 1.0)
    assert done["errors"] == [{"path": "blob.py", "reason": "binary file (NUL bytes)"}]
    cooldown = client.post(f"/api/v1/roots/{root.pk}/reindex", data=json.dumps({}), content_type="application/json")
    assert cooldown.status_code == 429 and "cooldown" in cooldown.json()["error"]
    assert client.get("/api/v1/index-jobs/999999").status_code == 404
    hits = client.post(
        "/api/v1/search",
        data=json.dumps({"query": "handler for the billing service", "sources": ["file"]}),
        content_type="application/json",
    ).json()["hits"]
    assert hits[0]["path"].startswith("app/mod_") and hits[0]["symbol"].startswith("handler_")


def test_a_job_whose_worker_is_killed_is_taken_over_by_the_next_worker_and_matches_a_clean_index(base, settings):
    # An hour: the takeover must not wait for the job's heartbeat to go stale (nor for the reaper).
    settings.RAG_JOB_STALE_SECONDS = 3600
    directory = base / "big"
    tree_make(directory, files=600)
    root = WorkspaceRoot.objects.create(name="big", path=str(directory))
    # Small batches make progress visible early, so the kill lands mid-job.
    with running_worker(
        "doomed", RAG_EMBED_BATCH_SIZE="16", RAG_INDEX_FLUSH_CHUNKS="32", RAG_JOB_STALE_SECONDS="3600"
    ) as doomed:
        job, _ = tasks.root_reindex_request(root_id=root.pk, trigger="test")
        # Words first: every file is written before the vectors stage, which the kill lands in.
        wait_for(lambda: IndexJob.objects.get(pk=job.pk).chunks_embedded >= 64, what="the job to be under way")
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=30)
    killed = IndexJob.objects.get(pk=job.pk)
    assert killed.status == JobStatus.RUNNING and killed.chunks_embedded < killed.chunks_queued  # killed mid-job
    assert Chunk.objects.filter(source__key=f"root:{root.pk}", vector_pending=True).exists()
    # Its database session ends with it, and so does its hold on the root: that is the proof it is gone.
    wait_for(lambda: locks.root_lock_holder(root.pk) is None, timeout=30, what="the killed worker's session to end")

    # The killed worker's message stays unacknowledged in Redis until the visibility timeout (hours);
    # the next worker finds the job on connecting to the broker (the recovery sweep) and takes it over.
    with running_worker("rescuer", RAG_JOB_STALE_SECONDS="3600"):
        wait_for(
            lambda: IndexJob.objects.get(pk=job.pk).status in (JobStatus.SUCCEEDED, JobStatus.FAILED),
            timeout=300,
            what="the job to be taken over",
        )
    done = IndexJob.objects.get(pk=job.pk)
    assert done.status == JobStatus.SUCCEEDED, done.message
    assert done.attempt == 2 and done.worker != killed.worker
    assert done.files_unchanged > 0  # it resumed: files finished before the kill were not redone
    # Only the chunks still waiting were embedded by the new attempt.
    assert done.chunks_embedded == done.chunks_queued < Chunk.objects.filter(source__key=f"root:{root.pk}").count()
    assert not Chunk.objects.filter(source__key=f"root:{root.pk}", vector_pending=True).exists()
    assert done.files_changed + done.files_unchanged == done.files_total == 600  # counted once, by the new attempt
    assert IndexJob.objects.filter(root=root).count() == 1  # the same job carried on, no new one

    clean_dir = base / "clean"
    shutil.copytree(directory, clean_dir)
    clean = WorkspaceRoot.objects.create(name="clean", path=str(clean_dir))
    clean_job, _ = jobs.root_job_request(root_id=clean.pk, trigger="test")
    pipeline.root_index(job=jobs.job_start(job_id=clean_job.pk))
    assert index_rows(root) == index_rows(clean)
    duplicates = (
        Chunk.objects.filter(source__key=f"root:{root.pk}")
        .values("path", "chunk_index")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    assert not duplicates.exists()
    assert len({row[0] for row in index_rows(root)}) == 600


def test_a_killed_pool_child_s_job_is_redelivered_and_taken_over_at_once(base, settings):
    # `make run`'s worker is a prefork pool: the parent outlives a killed child, and with acks_late and
    # reject_on_worker_lost it puts the message back; the next child finds the root unlocked and takes over.
    settings.RAG_JOB_STALE_SECONDS = 3600
    directory = base / "big"
    tree_make(directory, files=300)
    root = WorkspaceRoot.objects.create(name="big", path=str(directory))
    with running_worker(
        "pool", pool="prefork", RAG_EMBED_BATCH_SIZE="16", RAG_INDEX_FLUSH_CHUNKS="32", RAG_JOB_STALE_SECONDS="3600"
    ):
        job, _ = tasks.root_reindex_request(root_id=root.pk, trigger="test")
        wait_for(lambda: IndexJob.objects.get(pk=job.pk).chunks_embedded >= 64, what="the job to be under way")
        child = IndexJob.objects.get(pk=job.pk).worker
        os.kill(int(child.rsplit(":", 1)[1]), signal.SIGKILL)
        wait_for(
            lambda: IndexJob.objects.get(pk=job.pk).status in (JobStatus.SUCCEEDED, JobStatus.FAILED),
            timeout=300,
            what="the job to be taken over",
        )
    done = IndexJob.objects.get(pk=job.pk)
    assert done.status == JobStatus.SUCCEEDED, done.message
    assert done.attempt == 2 and done.worker != child and done.files_unchanged > 0
    assert len({row[0] for row in index_rows(root)}) == 300
