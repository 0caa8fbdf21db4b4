"""Targeted root jobs (issue 25 item 2): a job about a few paths reads only those, through the same per-file code
as the full walk, and deletes only what it was told about (real PostgreSQL, MiniLM)."""

import os
from pathlib import Path

import pytest
from django.db.models import Count

from kernel.errors import ApplicationError
from sources import jobs, pipeline
from sources.models import Chunk, IndexJob, JobStatus, WorkspaceRoot
from tests.conftest import index_root

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(tmp_path, settings) -> WorkspaceRoot:
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    (directory / "pkg").mkdir(parents=True)
    (directory / "README.md").write_text("# Readme\n\nThe readme of the repository.\n")
    (directory / "pkg" / "alpha.py").write_text("def alpha_function():\n    return 'alpha'\n")
    (directory / "pkg" / "beta.py").write_text("def beta_function():\n    return 'beta'\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=3600)
    assert index_root(root).status == JobStatus.SUCCEEDED
    root.refresh_from_db()
    return root


def stored(root: WorkspaceRoot) -> dict[str, int]:
    rows = Chunk.objects.filter(source__root=root).values("path").annotate(n=Count("id"))
    return {row["path"]: row["n"] for row in rows}


def targeted(root: WorkspaceRoot, *paths: str) -> IndexJob:
    """Request a job about ``paths`` and run it here, through the real pipeline."""
    job, created = jobs.root_job_request(root_id=root.pk, paths=list(paths), trigger="watch")
    assert created and job.paths == sorted(set(paths))
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.message
    return job


def test_an_edited_file_is_re_indexed_without_walking_the_root(root):
    before = root.last_verified_at
    (Path(root.path) / "pkg" / "alpha.py").write_text("def alpha_function():\n    return 'zebra crossing'\n")
    job = targeted(root, "pkg/alpha.py")
    assert (job.files_total, job.files_changed, job.files_deleted) == (1, 1, 0)
    assert "zebra crossing" in Chunk.objects.get(path="pkg/alpha.py").content
    assert set(stored(root)) == {"README.md", "pkg/alpha.py", "pkg/beta.py"}
    root.refresh_from_db()
    assert root.last_verified_at == before  # not a verification of the whole root: the re-verify still runs


def test_an_unchanged_file_named_by_a_job_is_not_embedded_again(root):
    job = targeted(root, "pkg/beta.py")
    assert (job.files_unchanged, job.chunks_embedded) == (1, 0)


def test_a_created_file_is_indexed_and_files_it_was_not_told_about_stay(root):
    (Path(root.path) / "pkg" / "gamma.py").write_text("def gamma_function():\n    return 'gamma'\n")
    (Path(root.path) / "pkg" / "beta.py").unlink()  # gone, but not named: only the next full job removes it
    job = targeted(root, "pkg/gamma.py")
    assert (job.files_changed, job.files_deleted) == (1, 0)
    assert set(stored(root)) == {"README.md", "pkg/alpha.py", "pkg/beta.py", "pkg/gamma.py"}


def test_a_deleted_file_loses_its_chunks(root):
    (Path(root.path) / "pkg" / "beta.py").unlink()
    job = targeted(root, "pkg/beta.py")
    assert (job.files_total, job.files_deleted) == (0, 1)
    assert set(stored(root)) == {"README.md", "pkg/alpha.py"}


def test_a_renamed_file_is_deleted_under_its_old_name_and_created_under_its_new(root):
    directory = Path(root.path)
    (directory / "pkg" / "alpha.py").rename(directory / "pkg" / "omega.py")
    job = targeted(root, "pkg/alpha.py", "pkg/omega.py")
    assert (job.files_changed, job.files_deleted) == (1, 1)
    assert set(stored(root)) == {"README.md", "pkg/omega.py", "pkg/beta.py"}


def test_a_renamed_directory_moves_every_file_below_it(root):
    directory = Path(root.path)
    (directory / "pkg").rename(directory / "lib")
    job = targeted(root, "pkg", "lib")
    assert (job.files_changed, job.files_deleted) == (2, 2)
    assert set(stored(root)) == {"README.md", "lib/alpha.py", "lib/beta.py"}


def test_a_file_that_no_longer_matches_the_patterns_loses_its_chunks(root):
    (Path(root.path) / ".gitignore").write_text("pkg/beta.py\n")
    targeted(root, "pkg/beta.py")
    assert "pkg/beta.py" not in stored(root)
    WorkspaceRoot.objects.filter(pk=root.pk).update(include_globs="*.md")
    root.refresh_from_db()
    targeted(root, "pkg/alpha.py")
    assert set(stored(root)) == {"README.md"}


def test_a_file_replaced_by_a_symlink_is_refused_and_loses_its_chunks(root, tmp_path):
    secret = tmp_path / "secret.py"
    secret.write_text("def outside():\n    return 'outside the root'\n")
    alpha = Path(root.path) / "pkg" / "alpha.py"
    alpha.unlink()
    alpha.symlink_to(secret)
    job = targeted(root, "pkg/alpha.py")
    assert job.errors == [{"path": "pkg/alpha.py", "reason": "symlink (not followed)"}]
    assert "pkg/alpha.py" not in stored(root)
    assert not Chunk.objects.filter(content__contains="outside the root").exists()


def test_a_path_through_a_symlinked_directory_is_refused(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("def leak():\n    return 'leaked'\n")
    os.symlink(outside, Path(root.path) / "linked")
    job = targeted(root, "linked/leak.py")
    assert job.errors == [{"path": "linked/leak.py", "reason": "parent directory linked is a symlink (not followed)"}]
    assert not Chunk.objects.filter(content__contains="leaked").exists()


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../outside.py", "pkg/../../outside.py", "pkg//alpha.py", "", ".", "a\x00b"]
)
def test_a_path_outside_the_root_is_refused_and_nothing_is_queued(root, path):
    with pytest.raises(ApplicationError, match="root-relative"):
        jobs.root_job_request(root_id=root.pk, paths=[path], trigger="watch")
    assert not IndexJob.objects.filter(status=JobStatus.QUEUED).exists()


def test_targeted_requests_coalesce_while_one_is_queued(root):
    first, created = jobs.root_job_request(root_id=root.pk, paths=["pkg/alpha.py"], trigger="watch")
    second, again = jobs.root_job_request(root_id=root.pk, paths=["pkg/beta.py", "pkg/alpha.py"], trigger="watch")
    assert created and not again and second.pk == first.pk
    assert second.paths == ["pkg/alpha.py", "pkg/beta.py"]
    first.refresh_from_db()
    assert first.paths == ["pkg/alpha.py", "pkg/beta.py"]


def test_a_queued_full_job_absorbs_targeted_requests(root):
    full, _ = jobs.root_job_request(root_id=root.pk, force=True, trigger="admin")
    job, created = jobs.root_job_request(root_id=root.pk, paths=["pkg/alpha.py"], trigger="watch")
    assert not created and job.pk == full.pk and job.paths == []


def test_a_full_request_widens_a_queued_targeted_job(root):
    targeted_job, _ = jobs.root_job_request(root_id=root.pk, paths=["pkg/alpha.py"], trigger="watch")
    job, created = jobs.root_job_request(root_id=root.pk, ignore_cooldown=True, trigger="admin")
    assert not created and job.pk == targeted_job.pk
    targeted_job.refresh_from_db()
    assert targeted_job.paths == []


def test_a_targeted_request_ignores_the_cooldown(root):
    with pytest.raises(ApplicationError, match="cooldown"):
        jobs.root_job_request(root_id=root.pk, trigger="schedule")
    _, created = jobs.root_job_request(root_id=root.pk, paths=["README.md"], trigger="watch")
    assert created
