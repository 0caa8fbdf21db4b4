"""A real job's progress on a real Celery worker: it never goes back, and the API and the admin agree on it."""

import html
import re

import pytest
from django.urls import reverse

from sources import tasks
from sources.models import JobStatus, WorkspaceRoot
from tests.conftest import running_worker
from tests.tree import tree_make

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.slow]


def test_progress_never_goes_back_and_the_api_and_the_admin_show_the_same_numbers(
    manage_client, admin_client, tmp_path, settings
):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0  # the test reads the job's API as fast as it can; a 429 has no percent
    tree_make(tmp_path / "repo", files=300)
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))
    api_percents, page_percents, agreed, phases = [], [], 0, set()
    searched_while_embedding = None
    # Small batches: the job beats every 2 s at most, and its counters move between beats.
    with running_worker("progress", RAG_EMBED_BATCH_SIZE="8", RAG_INDEX_FLUSH_CHUNKS="64"):
        job, created = tasks.root_reindex_request(root_id=root.pk, trigger="test")
        assert created
        live = reverse("admin:sources_indexjob_live", args=[job.pk])
        for _ in range(20_000):  # bounded; the job ends long before
            before = manage_client.get(f"/api/v1/index-jobs/{job.pk}").json()
            fragment = admin_client.get(live).content.decode()
            listing = admin_client.get("/admin/sources/workspaceroot/").content.decode()
            after = manage_client.get(f"/api/v1/index-jobs/{job.pk}").json()
            page_percent = int(re.search(r'<progress max="100" value="(\d+)"', fragment)[1])
            api_percents += [before["percent"], after["percent"]]
            page_percents.append(page_percent)
            phases.add(before["phase"])
            if before == after and before["status"] == "running":
                # The row did not change while the pages were read: they must show exactly what the API said.
                assert page_percent == before["percent"], (fragment, before)
                assert before["progress_text"] in html.unescape(fragment)
                assert before["progress_text"] in html.unescape(listing)
                assert before["searchable"] in html.unescape(fragment)
                agreed += 1
            if (
                searched_while_embedding is None
                and after["status"] == "running"
                and after["phase"] == "embedding"
                and after["chunks_embedded"] < after["chunks_queued"]
            ):
                # Words first: every file is written and found by its words while the vectors are still coming.
                assert after["chunks_written"] == after["chunks_queued"] > after["chunks_embedded"], after
                assert after["searchable"].startswith(f"Searchable by words: {after['files_total']} of 300 files")
                searched_while_embedding = manage_client.post(
                    "/api/v1/search",
                    {"query": "handler_296 request number 296", "mode": "lexical", "k": 3},
                    content_type="application/json",
                ).json()
            if after["status"] not in ("queued", "running"):
                break
    assert after["status"] == JobStatus.SUCCEEDED, after["message"]
    # The job may have ended between the fragment's read and the API's last one: the finished fragment says 100.
    finished = admin_client.get(live).content.decode()
    page_percents.append(int(re.search(r'<progress max="100" value="(\d+)"', finished)[1]))
    assert api_percents == sorted(api_percents), api_percents  # never backwards
    assert page_percents == sorted(page_percents), page_percents
    assert page_percents[-1] == 100 and len(set(page_percents)) >= 4, page_percents  # it moved on the way
    assert agreed >= 3, agreed
    assert {"reading", "embedding"} & phases, phases
    assert searched_while_embedding is not None, "the job was never seen embedding"
    first = searched_while_embedding["hits"][0]
    assert first["path"] == "app/mod_296.py" and first["vector_pending"] is True, searched_while_embedding
    assert after["outcome"]["title"] == "Succeeded" and after["outcome"]["text"].startswith("300 files indexed")
