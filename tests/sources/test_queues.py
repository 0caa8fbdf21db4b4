"""Two queues (sources/queues.py): a save is indexed on its own worker while a full index job holds the other."""

import contextlib
import json

import psycopg
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from kernel.heartbeats import queue_lengths
from sources import items, jobs, queues, tasks
from sources.models import IndexJob, JobStatus, Memory, Skill, UploadedDocument, WorkspaceRoot
from tests import documents
from tests.conftest import api_client, running_worker, wait_for
from tests.tree import tree_make


@pytest.mark.unit
def test_every_task_has_its_queue_in_the_one_table_and_unknown_work_is_bulk():
    assert set(settings.CELERY_TASK_ROUTES) == {
        "sources.tasks.item_index_task",
        "sources.tasks.root_index_task",
        "sources.tasks.jobs_reap_task",
        "sources.tasks.root_reverify_task",
        "sources.tasks.skills_reverify_task",
        "sources.tasks.root_push_retry_task",
        "sources.tasks.vectors_batch_task",
        # The per-kind tasks before item_index_task, for messages a broker held at the upgrade.
        *(f"sources.tasks.{kind}_index_task" for kind in items.ITEM_KINDS),
    }
    assert set(queues.ITEM_QUEUES) == set(items.ITEM_KINDS)
    assert settings.CELERY_TASK_ROUTES["sources.tasks.skill_index_task"] == {"queue": queues.INTERACTIVE}
    assert settings.CELERY_TASK_ROUTES["sources.tasks.jobs_reap_task"] == {"queue": queues.INTERACTIVE}
    assert settings.CELERY_TASK_ROUTES["sources.tasks.skills_reverify_task"] == {"queue": queues.BULK}
    assert settings.CELERY_TASK_ROUTES["sources.tasks.item_index_task"] == {"queue": queues.BULK}
    # Every bulk process helps with a running job's vector batches (sources/pipeline/vectors.py).
    assert settings.CELERY_TASK_ROUTES["sources.tasks.vectors_batch_task"] == {"queue": queues.BULK}
    assert settings.CELERY_TASK_DEFAULT_QUEUE == queues.BULK


@pytest.mark.unit
def test_an_upload_is_extracted_on_the_bulk_queue_and_a_memory_is_saved_on_the_interactive_one():
    """One hostile PDF held the interactive worker for the whole extraction limit (issue 39, item 6)."""
    assert items.ITEM_KINDS["document"].queue == queues.BULK
    assert items.ITEM_KINDS["memory"].queue == queues.INTERACTIVE
    assert items.ITEM_KINDS["tool"].queue == queues.INTERACTIVE
    assert items.ITEM_KINDS["skill"].queue == queues.INTERACTIVE
    assert settings.CELERY_TASK_ROUTES["sources.tasks.document_index_task"] == {"queue": queues.BULK}


@pytest.mark.unit
def test_a_full_walk_is_bulk_and_a_job_for_given_paths_is_interactive():
    assert queues.job_queue(IndexJob(force=False)) == queues.BULK
    assert queues.job_queue(IndexJob(force=True)) == queues.BULK
    assert queues.job_queue(IndexJob(paths=["docs/a.md"])) == queues.INTERACTIVE
    # A watched PDF or Office file runs the extraction stage: bulk, like an upload.
    assert queues.job_queue(IndexJob(paths=["docs/a.md", "docs/Report.PDF"])) == queues.BULK
    assert queues.job_queue(IndexJob(paths=["sheet.xlsx"], trigger="push")) == queues.BULK
    # A git root's fetch (webhook push or schedule) starts interactive; a rebuild it finds is handed to bulk.
    assert queues.job_queue(IndexJob(trigger="push")) == queues.INTERACTIVE
    assert queues.job_queue(IndexJob(trigger="git-rebuild")) == queues.BULK
    assert queues.job_queue(IndexJob(paths=[])) == queues.BULK


def _roots(tmp_path, settings, names):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    made = []
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# {name}\n")
        made.append(WorkspaceRoot.objects.create(name=name, path=str(tmp_path / name)))
    return made


@pytest.mark.django_db
def test_a_queued_job_is_told_how_many_jobs_are_ahead_of_it_on_its_queue(tmp_path, settings):
    a, b, c = _roots(tmp_path, settings, ["a", "b", "c"])
    first, _ = jobs.root_job_request(root_id=a.pk, trigger="test")
    second, _ = jobs.root_job_request(root_id=b.pk, trigger="test")
    third, _ = jobs.root_job_request(root_id=c.pk, trigger="test")
    IndexJob.objects.filter(pk=first.pk).update(status=JobStatus.RUNNING)
    first.refresh_from_db()

    ahead = jobs.jobs_ahead([first, second, third])
    assert ahead == {second.pk: 1, third.pk: 2}  # the running job, then the one queued before it
    assert jobs.job_state(third, ahead.get(third.pk)) == "queued behind 2 jobs on the bulk queue"
    assert jobs.job_state(second, ahead.get(second.pk)) == "queued behind 1 job on the bulk queue"
    assert jobs.job_state(first, ahead.get(first.pk)) == "started"

    IndexJob.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED)
    second.refresh_from_db()
    assert jobs.job_state(second, jobs.jobs_ahead([second])[second.pk]) == "queued, next on the bulk queue"


@pytest.mark.django_db
def test_a_job_on_the_interactive_queue_is_not_counted_behind_bulk_jobs(tmp_path, settings):
    a, b = _roots(tmp_path, settings, ["a", "b"])
    full, _ = jobs.root_job_request(root_id=a.pk, trigger="test")
    targeted, _ = jobs.root_job_request(root_id=b.pk, trigger="test", paths=["README.md"])
    assert jobs.jobs_ahead([full, targeted]) == {full.pk: 0, targeted.pk: 0}
    assert jobs.job_state(targeted, 0) == "queued, next on the interactive queue"


@pytest.mark.django_db
def test_the_api_says_where_a_queued_job_waits_and_started_only_once_it_runs(tmp_path, settings, manage_client):
    a, b = _roots(tmp_path, settings, ["a", "b"])
    first = manage_client.post(f"/api/v1/roots/{a.pk}/reindex", "{}", content_type="application/json").json()["job"]
    second = manage_client.post(f"/api/v1/roots/{b.pk}/reindex", "{}", content_type="application/json").json()["job"]
    assert (first["queue"], first["queued_behind"], first["state"]) == ("bulk", 0, "queued, next on the bulk queue")
    assert (second["queued_behind"], second["state"]) == (1, "queued behind 1 job on the bulk queue")

    IndexJob.objects.filter(pk=first["id"]).update(status=JobStatus.RUNNING)
    running = manage_client.get(f"/api/v1/index-jobs/{first['id']}").json()
    assert (running["queued_behind"], running["state"]) == (None, "started")
    listed = {root["name"]: root["last_job"] for root in manage_client.get("/api/v1/roots").json()}
    assert listed["b"]["state"] == "queued behind 1 job on the bulk queue"


@pytest.mark.django_db(transaction=True)
def test_a_targeted_job_widened_to_the_whole_root_moves_to_the_bulk_queue(tmp_path, settings):
    (root,) = _roots(tmp_path, settings, ["a"])
    job, created = tasks.root_reindex_request(root_id=root.pk, trigger="watch", paths=["README.md"])
    assert created and queues.job_queue(job) == queues.INTERACTIVE
    widened, created = tasks.root_reindex_request(root_id=root.pk, trigger="admin")  # joins it, for the whole root
    assert not created and widened.pk == job.pk
    before = broker_lengths()
    # Its message was sent to the interactive worker: that worker hands it to bulk instead of walking the root.
    assert tasks.root_index_task.apply(args=(job.pk,), routing_key=queues.INTERACTIVE).get() is None
    assert broker_lengths()["bulk"] - before["bulk"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.paths == []


def broker_lengths() -> dict[str, int]:
    lengths = queue_lengths(queues.QUEUES)
    assert lengths is not None
    return lengths


@pytest.mark.django_db(transaction=True)
def test_messages_land_on_the_queue_the_table_names(tmp_path, settings):
    (root,) = _roots(tmp_path, settings, ["a"])
    before = broker_lengths()
    Skill.objects.create(slug="heron", body="# Heron\n\nA grey bird.\n")  # a save: interactive
    tasks.root_reindex_request(root_id=root.pk, trigger="test")  # a full walk: bulk
    tasks.skills_reverify_task()  # everything again (after a model swap, every one re-embedded): bulk
    after = broker_lengths()
    assert after["interactive"] - before["interactive"] == 1
    assert after["bulk"] - before["bulk"] == 2


@pytest.mark.django_db(transaction=True)
def test_an_uploads_message_lands_on_the_bulk_queue_and_a_memorys_on_the_interactive_one(manage_client):
    before = broker_lengths()
    uploaded = manage_client.post(
        "/api/v1/documents", data={"file": [SimpleUploadedFile("report.pdf", documents.report_pdf())]}
    )
    assert uploaded.status_code == 201, uploaded.content
    after_upload = broker_lengths()
    assert (after_upload["bulk"] - before["bulk"], after_upload["interactive"] - before["interactive"]) == (1, 0)
    remembered = manage_client.post("/api/v1/memories", {"text": "The kiln runs at night."}, "application/json")
    assert remembered.status_code == 201, remembered.content
    after = broker_lengths()
    assert (after["bulk"] - after_upload["bulk"], after["interactive"] - after_upload["interactive"]) == (0, 1)


@contextlib.contextmanager
def row_held(job_id: int):
    """Hold the job's row locked from another session: its worker blocks at its next progress update.

    The job stays running for as long as the test needs, whatever the machine's speed.
    """
    with psycopg.connect(**connection.get_connection_params()) as holder:
        holder.execute("SELECT 1 FROM sources_indexjob WHERE id = %s FOR UPDATE", [job_id])
        yield
        holder.rollback()


def _found(client, query: str, slug: str) -> bool:
    response = client.post("/api/v1/search", data=json.dumps({"query": query, "k": 5}), content_type="application/json")
    assert response.status_code == 200, response.content
    return any(hit["citation"].startswith(f"skill:{slug}:") for hit in response.json()["hits"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_skill_saved_while_a_bulk_job_runs_is_searchable_before_that_job_ends(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_JOB_STALE_SECONDS = 3600  # the held job must not be taken for a hung one
    tree_make(tmp_path / "big", files=300)
    root = WorkspaceRoot.objects.create(name="big", path=str(tmp_path / "big"))
    client = api_client()
    small_batches = {"RAG_EMBED_BATCH_SIZE": "16", "RAG_INDEX_FLUSH_CHUNKS": "32", "RAG_JOB_STALE_SECONDS": "3600"}
    with (
        running_worker("bulk", queues=queues.BULK, **small_batches),
        running_worker("interactive", queues=queues.INTERACTIVE),
    ):
        job, created = tasks.root_reindex_request(root_id=root.pk, trigger="test")
        assert created
        wait_for(lambda: IndexJob.objects.get(pk=job.pk).chunks_embedded >= 16, what="the bulk job to be under way")
        with row_held(job.pk):
            Skill.objects.create(
                slug="kayak-rental",
                body="# Kayak rental\n\nHow to rent a sea kayak at the harbour: book the day before.",
            )
            wait_for(
                lambda: Skill.objects.get(slug="kayak-rental").index_status in ("indexed", "failed"),
                what="the skill to be indexed",
            )
            assert Skill.objects.get(slug="kayak-rental").index_status == "indexed"
            assert _found(client, "rent a sea kayak at the harbour", "kayak-rental")
            assert IndexJob.objects.get(pk=job.pk).status == JobStatus.RUNNING
        done = wait_for(
            lambda: (j := IndexJob.objects.get(pk=job.pk)).status in (JobStatus.SUCCEEDED, JobStatus.FAILED) and j,
            timeout=300,
            what="the bulk job to end",
        )
    assert done.status == JobStatus.SUCCEEDED, done.message
    assert done.files_total == 300


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
@pytest.mark.slow
def test_a_memory_written_after_an_upload_is_indexed_without_waiting_for_its_extraction(manage_client):
    """The interactive worker alone: the memory is its work, the upload's extraction is not (issue 39, item 6)."""
    with running_worker("interactive-only", queues=queues.INTERACTIVE):
        uploaded = manage_client.post(
            "/api/v1/documents", data={"file": [SimpleUploadedFile("report.pdf", documents.report_pdf())]}
        )
        assert uploaded.status_code == 201, uploaded.content
        remembered = manage_client.post("/api/v1/memories", {"text": "The kiln runs at night."}, "application/json")
        memory_id = remembered.json()["id"]
        wait_for(
            lambda: Memory.objects.get(pk=memory_id).index_status in ("indexed", "failed"),
            what="the memory to be indexed",
        )
        assert Memory.objects.get(pk=memory_id).index_status == "indexed"
        # Still waiting for the bulk worker: it never held up the memory, whatever a hostile PDF would cost.
        assert UploadedDocument.objects.get(name="report.pdf").index_status == "queued"
