"""What a finished index job says it did: counts, left-out files by reason, and no green success for nothing."""

import pytest

from sources import jobs, pipeline
from sources.models import IndexJob, JobStatus, WorkspaceRoot
from sources.walk import EXCLUDED_DIRECTORY, GITIGNORED, GITIGNORED_DIRECTORY, NOT_INCLUDED
from tests.conftest import index_root

pytestmark = pytest.mark.django_db


@pytest.fixture
def base(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    return tmp_path


def root_at(base, name: str, files: dict[str, bytes | str]) -> WorkspaceRoot:
    directory = base / name
    directory.mkdir()
    for relative, content in files.items():
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    return WorkspaceRoot.objects.create(name=name, path=str(directory), include_globs="*.py *.md")


def outcome_of(manage_client, job: IndexJob) -> dict:
    return manage_client.get(f"/api/v1/index-jobs/{job.pk}").json()


def test_an_empty_root_is_a_warning_that_there_was_nothing_to_index(base, manage_client, admin_client):
    job = index_root(root_at(base, "empty", {}))
    assert job.status == JobStatus.SUCCEEDED
    body = outcome_of(manage_client, job)
    assert body["outcome"] == {
        "level": "warning",
        "title": "Nothing to index",
        "text": "the root holds no files: 0 files indexed, 0 chunks embedded",
    }
    assert (body["percent"], body["phase"]) == (100, "succeeded")
    page = admin_client.get(f"/admin/sources/indexjob/{job.pk}/change/").content.decode()
    assert 'class="job-outcome status-warning"' in page and "Nothing to index" in page
    assert "every file was read" not in page
    listing = admin_client.get("/admin/sources/workspaceroot/").content.decode()
    assert '<b class="status status-warning">Nothing to index</b>' in listing


def test_a_root_whose_only_file_is_skipped_warns_and_counts_the_skip_by_reason(base, manage_client):
    job = index_root(root_at(base, "blob", {"blob.py": b"\x7fELF\x00\x00\x01"}))
    body = outcome_of(manage_client, job)
    assert (body["outcome"]["level"], body["outcome"]["title"]) == ("warning", "Nothing to index")
    assert body["outcome"]["text"] == (
        "every file it found was skipped or failed: 0 files indexed, 0 chunks embedded; 1 skipped"
    )
    assert body["skipped_by_reason"] == {"binary file": 1}  # by reason for the managers' API; the summary counts only


def test_files_left_out_by_patterns_gitignore_and_excluded_directories_are_counted_by_reason(base, manage_client):
    root = root_at(
        base,
        "mixed",
        {
            "app.py": "def ship():\n    return 1\n",
            "README.md": "# Mixed\n\nA root with a bit of everything.\n",
            "notes.txt": "not a pattern of this root\n",
            "image.png": b"\x89PNG",
            "debug.py": "print('ignored by .gitignore')\n",
            ".gitignore": "debug.py\nout/\n",
            "out/generated.py": "x = 1\n",
            "node_modules/pkg/index.py": "y = 2\n",
            "big.py": "z = 3\n" * 100,
        },
    )
    WorkspaceRoot.objects.filter(pk=root.pk).update(exclude_dirs="node_modules", max_file_bytes=500)
    root.refresh_from_db()
    job = index_root(root)
    assert job.left_out == {NOT_INCLUDED: 3, GITIGNORED: 1, GITIGNORED_DIRECTORY: 1, EXCLUDED_DIRECTORY: 1}
    body = outcome_of(manage_client, job)
    assert body["outcome"]["level"] == "success"
    assert body["outcome"]["text"] == (
        "2 files indexed, 2 chunks embedded; left out: 3 files not matching the root's patterns, "
        "1 directory excluded by name (exclude_dirs), 1 directory ignored by .gitignore, "
        "1 file ignored by .gitignore; 1 skipped"
    )
    assert job.message == body["outcome"]["text"]  # the log and rag_index say the same


def test_a_cancelled_job_says_how_far_it_got(base, manage_client, monkeypatch):
    files = {f"mod_{i}.py": f"def f{i}():\n    return {i}\n" for i in range(30)}
    root = root_at(base, "cancel", files)
    job, _ = jobs.root_job_request(root_id=root.pk, trigger="test")
    running = jobs.job_start(job_id=job.pk)
    beat = jobs.job_progress

    def cancel_at_the_tenth_file(job: IndexJob, **counters: int) -> None:
        if job.files_seen >= 10:
            jobs.job_cancel(job_id=job.pk, by="admin")  # as the admin's Cancel button does, between two beats
        beat(job, **counters)

    monkeypatch.setattr(pipeline.run, "_HEARTBEAT_SECONDS", 0.0)  # a beat per file: the cancel lands at a known file
    monkeypatch.setattr(jobs, "job_progress", cancel_at_the_tenth_file)
    pipeline.root_index(job=running)
    body = outcome_of(manage_client, job)
    assert body["status"] == "cancelled"
    assert body["outcome"]["title"] == "Cancelled"
    assert body["outcome"]["text"].startswith("cancelled by admin after 9 of 30 files (")
    assert "the next job goes on from there" in body["outcome"]["text"]


def test_a_job_cancelled_before_it_started_says_so(base, manage_client):
    root = root_at(base, "early", {"a.py": "x = 1\n"})
    job, _ = jobs.root_job_request(root_id=root.pk, trigger="test")
    jobs.job_cancel(job_id=job.pk, by="admin")
    assert outcome_of(manage_client, job)["outcome"] == {
        "level": "info",
        "title": "Cancelled",
        "text": "cancelled by admin, before it read any file",
    }
