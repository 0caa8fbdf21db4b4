"""The admins' console: roots index on save, jobs are read-only records with live progress, what was indexed shows."""

import re
from pathlib import Path

import pytest
from django.urls import reverse

from sources import jobs, pipeline, services
from sources.models import IndexJob, JobStatus, Skill, WorkspaceRoot
from surfaces.admin.roots import SegmentForm
from tests.conftest import index_root

pytestmark = pytest.mark.django_db


@pytest.fixture
def repo(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    (directory / "guide.md").write_text("# Guide\n\nHow to ship the narwhal.\n")
    (directory / "app.py").write_text("def ship():\n    return 'narwhal'\n")
    (directory / "blob.py").write_bytes(b"\x7fELF\x00\x00\x01")
    return directory


def root_form(repo: Path, **changes) -> dict:
    """The add form of a root as the admin posts it (defaults included, no segments)."""
    fields = {
        "name": "repo",
        "path": str(repo),
        "enabled": "on",
        "include_globs": "*.py *.md",
        "exclude_dirs": ".git",
        "deny_patterns": "",
        "scan_secrets": "on",
        "max_file_bytes": "500000",
        "embedding_model_name": "",
        "similarity_threshold": "",
        "bot_id": "",
        "client_id": "",
        "channels": "",
        "cooldown_seconds": "300",
        "reverify_minutes": "30",
        "segments-TOTAL_FORMS": "0",
        "segments-INITIAL_FORMS": "0",
    }
    return {**fields, **changes}


def test_a_root_saved_in_the_admin_is_queued_for_its_first_index_at_once_and_says_what_it_waits_behind(
    admin_client, repo
):
    (repo.parent / "big").mkdir()
    big = WorkspaceRoot.objects.create(name="big", path=str(repo.parent / "big"))
    running, _ = jobs.root_job_request(root_id=big.pk, trigger="test")
    IndexJob.objects.filter(pk=running.pk).update(status=JobStatus.RUNNING)

    response = admin_client.post("/admin/sources/workspaceroot/add/", root_form(repo), follow=True)
    root = WorkspaceRoot.objects.get(name="repo")
    (job,) = IndexJob.objects.filter(root=root)
    assert (job.status, job.trigger) == (JobStatus.QUEUED, "admin")
    page = response.content.decode()
    link = f'<a href="/admin/sources/indexjob/{job.pk}/change/">job {job.pk}</a>'
    assert f"epo: index {link} queued behind 1 job on the bulk queue." in page
    assert "started" not in page  # it only waits
    listing = admin_client.get("/admin/sources/indexjob/").content.decode()
    assert "Queued behind 1 job on the bulk queue" in listing

    IndexJob.objects.filter(pk=running.pk).update(status=JobStatus.SUCCEEDED)
    again = admin_client.post(reverse("admin:sources_workspaceroot_reindex", args=[root.pk]), follow=True)
    assert f"epo: index {link} (it was already there) queued, next on the bulk queue." in again.content.decode()


def test_each_root_row_has_a_re_index_button_that_posts(admin_client, repo):
    root = WorkspaceRoot.objects.create(name="repo", path=str(repo))
    url = reverse("admin:sources_workspaceroot_reindex", args=[root.pk])
    listing = admin_client.get("/admin/sources/workspaceroot/").content.decode()
    assert f'formaction="{url}"' in listing and 'aria-label="Re-index repo"' in listing
    assert admin_client.get(url).status_code == 405
    assert admin_client.post(url).status_code == 302
    assert IndexJob.objects.filter(root=root, status=JobStatus.QUEUED).count() == 1
    admin_client.post(url)  # a second press finds the queued job
    assert IndexJob.objects.filter(root=root).count() == 1


def test_a_job_page_is_a_read_only_record_with_its_problems_as_a_table_and_links(admin_client, repo):
    root = WorkspaceRoot.objects.create(name="repo", path=str(repo))
    job = index_root(root)
    page = admin_client.get(f"/admin/sources/indexjob/{job.pk}/change/").content.decode()
    assert 'name="_save"' not in page and "/delete/" not in page  # no Save, no Delete
    assert f'<a href="/admin/sources/workspaceroot/{root.pk}/change/">repo</a>' in page
    assert "<td><code>blob.py</code></td><td>binary file (NUL bytes)</td>" in page
    assert '<progress max="100" value="100"' in page and "hx-trigger" not in page  # finished: no polling
    # Its vectors: every batch done, by the one process that ran it (in the test's process).
    assert re.search(r'Vector batches</th><td colspan="3">(\d+) of \1 done, embedded by 1 worker process<', page)
    root_page = admin_client.get(f"/admin/sources/workspaceroot/{root.pk}/change/").content.decode()
    assert f'href="/admin/sources/indexjob/?root__id__exact={root.pk}">1 job</a>' in root_page
    assert "<td><code>app.py</code></td><td>1</td><td>all-MiniLM-L6-v2#onnx</td>" in root_page  # chunks per file
    assert "<td><code>blob.py</code></td><td>binary file (NUL bytes)</td>" in root_page  # skipped, with the reason


def test_a_running_job_polls_for_its_progress_and_can_be_cancelled_mid_run(admin_client, repo):
    root = WorkspaceRoot.objects.create(name="repo", path=str(repo))
    job, _ = jobs.root_job_request(root_id=root.pk, trigger="test")
    live = admin_client.get(reverse("admin:sources_indexjob_live", args=[job.pk])).content.decode()
    assert 'hx-trigger="every 2s"' in live and "Cancel this job" in live
    running = jobs.job_start(job_id=job.pk)
    response = admin_client.post(reverse("admin:sources_indexjob_cancel", args=[job.pk]))
    assert response.status_code == 302
    pipeline.root_index(job=running)  # the worker's next heartbeat finds the job cancelled and stops
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.message == "cancelled by admin" and job.chunks_embedded == 0
    assert jobs.root_job_request(root_id=root.pk, trigger="test")[1]  # the root is free for the next job
    live = admin_client.get(reverse("admin:sources_indexjob_live", args=[job.pk])).content.decode()
    assert "hx-trigger" not in live and "Cancel this job" not in live


def test_a_jobs_progress_is_the_mark_its_worker_stored_and_whole_once_it_succeeded():
    # The share itself is computed by the worker (tests/sources/test_progress.py): every surface reads the mark.
    job = IndexJob(status=JobStatus.RUNNING, files_total=100, files_seen=50, chunks_queued=400, progress_mark=0.42)
    assert job.progress == 0.42
    job.status = JobStatus.SUCCEEDED
    assert job.progress == 1.0


def test_a_segment_glob_that_can_never_match_is_refused():
    form = SegmentForm(data={"name": "docs", "path_glob": "[unclosed", "embedding_model_name": "", "channels": ""})
    assert not form.is_valid() and "is not a valid glob" in form.errors["path_glob"][0]
    assert SegmentForm(data={"name": "docs", "path_glob": "docs/**", "channels": ""}).is_valid()


def test_text_typed_in_the_admin_is_stored_with_unix_newlines(admin_client):
    body = "# Deploy\r\n\r\nShip it.\r\n"
    response = admin_client.post(
        "/admin/sources/skill/add/",
        {"slug": "deploy", "title": "", "enabled": "on", "body": body, "bot_id": "", "client_id": "", "channels": ""},
    )
    assert response.status_code == 302
    assert Skill.objects.get(slug="deploy").body == "# Deploy\n\nShip it."  # (Django strips the ends, as before)


def test_the_chunking_preview_shows_sections_and_lines_before_saving(admin_client):
    url = reverse("admin:sources_skill_preview")
    page = admin_client.get("/admin/sources/skill/add/").content.decode()
    assert f'hx-post="{url}"' in page and "Preview chunking" in page
    preview = admin_client.post(
        url, {"body": "# Deploy\r\n\r\nShip it.\r\n\r\n## Roll back\r\n\r\nRevert the tag.\r\n"}
    )
    html = preview.content.decode()
    assert (
        "2 chunks" in html
        and "<td>1-3</td><td># Deploy</td>" in html
        and "<td>5-7</td><td># Deploy &gt; ## Roll back</td>" in html
    )
    assert not Skill.objects.exists()  # nothing saved
    front = admin_client.post(url, {"body": "---\nname: Deploy\ntags: [ops, release]\n---\n# Deploy\n\nShip.\n"})
    html = front.content.decode()
    # The front matter as the fields it sets, not a Python dict inside the (upper-cased) caption.
    assert "<dt>name</dt><dd>Deploy</dd>" in html and "<dt>tags</dt><dd>ops, release</dd>" in html
    assert "{&#x27;name&#x27;" not in html and "front matter:" not in html
    broken = admin_client.post(url, {"body": "---\nname: [unclosed\n---\n# X\n"}).content.decode()
    assert 'class="errornote"' in broken


def test_the_chunk_list_shows_what_each_chunk_cites(admin_client):
    services.skill_index(skill_id=Skill.objects.create(slug="deploy", body="# Deploy\n\nShip it.\n").pk)
    assert "skill:deploy:1-3" in admin_client.get("/admin/sources/chunk/").content.decode()


def test_a_roots_schedule_is_named_after_it_and_follows_a_rename(repo):
    from django_celery_beat.models import PeriodicTask

    root = WorkspaceRoot.objects.create(name="repo", path=str(repo))
    assert PeriodicTask.objects.get(args=f"[{root.pk}]").name == "Re-verify root repo"
    root.name = "main repo"
    root.save()
    assert list(PeriodicTask.objects.filter(args=f"[{root.pk}]").values_list("name", flat=True)) == [
        "Re-verify root main repo"
    ]
    root.delete()
    assert not PeriodicTask.objects.filter(args=f"[{root.pk}]").exists()


def test_the_index_overview_counts_every_kind_and_lists_what_fails(admin_client):
    services.skill_index(skill_id=Skill.objects.create(slug="deploy", body="# Deploy\n\nShip it.\n").pk)
    broken = Skill.objects.create(slug="broken", body="# B\n")
    services.skill_index_failed(skill_id=broken.pk, reason="the model could not be loaded")
    index = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/overview/"' in index
    page = admin_client.get("/admin/overview/").content.decode()
    assert "<td>Skill</td><td>2</td><td>2</td><td>1</td>" in page
    assert "the model could not be loaded" in page and "Tasks waiting" in page
    assert "all-MiniLM-L6-v2" in page


def test_the_overview_shows_the_measured_backend_choice_under_auto(admin_client, settings, monkeypatch, tmp_path):
    from sources.embedding.choice import BackendChoice, choice_save, machine_identity

    monkeypatch.setenv("RAG_VAR_DIR", str(tmp_path))
    assert "Embedding backend chosen by measurement" not in admin_client.get("/admin/overview/").content.decode()
    settings.RAG_EMBEDDING_BACKEND = "auto"
    assert "Not measured yet on this machine" in admin_client.get("/admin/overview/").content.decode()
    measured = BackendChoice(
        bulk="torch",
        query="onnx",
        agree=True,
        bulk_per_second={"torch": 30.5, "onnx": 28.1},
        query_ms={"torch": 15.1, "onnx": 6.1},
    )
    choice_save(machine_identity(model="all-MiniLM-L6-v2", device="cpu"), measured)
    page = admin_client.get("/admin/overview/").content.decode()
    assert "bulk torch (torch 30.5/s, onnx 28.1/s); query onnx (torch 15.1 ms, onnx 6.1 ms); vectors agree" in page


def test_try_a_search_as_a_chosen_caller_with_every_score_explained(admin_client):
    services.skill_index(skill_id=Skill.objects.create(slug="deploy", body="# Deploy\n\nShip the release.\n").pk)
    services.skill_index(
        skill_id=Skill.objects.create(slug="alpha-deploy", body="# Deploy alpha\n\nShip alpha.\n", bot_id="alpha").pk
    )
    assert 'href="/admin/try-search/"' in admin_client.get("/admin/").content.decode()
    shared = admin_client.get("/admin/try-search/", {"q": "ship the release"}).content.decode()
    assert "skill:deploy:1-3" in shared and "skill:alpha-deploy" not in shared  # as an unknown caller: shared only
    assert "<td>#1 (" in shared and "search " in shared  # ranks and timings shown
    alpha = admin_client.get("/admin/try-search/", {"q": "ship alpha", "bot_id": "alpha"}).content.decode()
    assert "skill:alpha-deploy:1-3" in alpha and "bot alpha" in alpha


def test_a_skills_page_lists_its_stored_chunks(admin_client):
    skill = Skill.objects.create(slug="deploy", body="# Deploy\n\nShip it.\n\n## Roll back\n\nRevert the tag.\n")
    services.skill_index(skill_id=skill.pk)
    page = admin_client.get(f"/admin/sources/skill/{skill.pk}/change/").content.decode()
    assert "2 chunks, as search reads them" in page
    assert "<td>1</td><td>5-7</td><td># Deploy &gt; ## Roll back</td>" in page and "all-MiniLM-L6-v2" in page


def test_help_texts_show_their_placeholders_whole(admin_client):
    # The admin renders help text as HTML: "api:<model>[@<dimensions>]" reached the page as "api:[@]".
    page = admin_client.get("/admin/sources/workspaceroot/add/").content.decode()
    assert "api:MODEL or api:MODEL@DIMENSIONS" in page and "api:[@]" not in page


def _roots_list_queries(admin_client, count_before: int, tmp_path: Path) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for number in range(count_before, count_before + 3):
        directory = tmp_path / f"r{number}"
        directory.mkdir()
        root = WorkspaceRoot.objects.create(name=f"r{number}", path=str(directory))
        job, _ = jobs.root_job_request(root_id=root.pk, trigger="test")
        IndexJob.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED)
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get("/admin/sources/workspaceroot/").status_code == 200
    return len(queries)


def test_the_roots_list_costs_the_same_queries_for_three_roots_or_six(admin_client, tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    three = _roots_list_queries(admin_client, 0, tmp_path)
    six = _roots_list_queries(admin_client, 3, tmp_path)
    assert six == three  # each row's last job comes with the page's one query for jobs, not one query per row
    listing = admin_client.get("/admin/sources/workspaceroot/").content.decode()
    assert listing.count("/admin/sources/indexjob/") >= 6  # and every row still links its last job


def test_a_roots_files_are_browsed_page_by_page_and_filtered_by_path(admin_client, repo, monkeypatch):
    """A root's page listed "the first 200 by path" of its files, with no way to the others."""
    from surfaces import selectors

    (repo / "docs").mkdir()
    (repo / "docs" / "deploy.md").write_text("# Deploy\n\nShip it.\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(repo))
    index_root(root)
    monkeypatch.setattr(selectors, "FILES_SHOWN", 2)  # a page of two files instead of 200
    root_page = admin_client.get(f"/admin/sources/workspaceroot/{root.pk}/change/").content.decode()
    files_url = reverse("admin:sources_workspaceroot_files", args=[root.pk])
    assert f'<a href="{files_url}">Browse all 3 files: filter by path, page by page</a>' in root_page
    first = admin_client.get(files_url).content.decode()
    assert "<code>app.py</code>" in first and "<code>docs/deploy.md</code>" in first
    assert "<code>guide.md</code>" not in first and "Page 1 of 2" in first and "1-2 by path" in first
    second = admin_client.get(files_url, {"page": "2"}).content.decode()
    assert "<code>guide.md</code>" in second and "<code>app.py</code>" not in second
    filtered = admin_client.get(files_url, {"path": "DOCS/"}).content.decode()
    assert "<code>docs/deploy.md</code>" in filtered and "<code>app.py</code>" not in filtered
    assert "1 with “DOCS/” in the path" in filtered and "Page 1 of" not in filtered
    assert "No file path holds “zebra”" in admin_client.get(files_url, {"path": "zebra"}).content.decode()
    assert admin_client.get(reverse("admin:sources_workspaceroot_files", args=[root.pk + 99])).status_code == 404


def test_the_overview_counts_only_the_chunks_search_reads_not_a_superseded_memory(admin_client):
    from sources.memories import MemoryScope, Provenance, memory_index, memory_write

    old = memory_write(text="The staging database is on db-1.", scope=MemoryScope(), provenance=Provenance("ops"))
    memory_index(memory_id=old.pk)
    new = memory_write(
        text="The staging database moved to db-2.", scope=MemoryScope(), provenance=Provenance("ops"), supersedes=old
    )
    memory_index(memory_id=new.pk)
    page = admin_client.get("/admin/overview/").content.decode()
    assert "<td>Memory</td><td>2</td><td>1</td><td>1</td>" in page  # two sources, one served: one chunk searched
