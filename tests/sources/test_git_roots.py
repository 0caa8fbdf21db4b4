"""Git roots (issue 25 item 1): cloned from a local bare repository by file:// URL, indexed commit by commit
through the same job, walk and ingest code as a directory root (real git, PostgreSQL and MiniLM)."""

import os
from pathlib import Path

import pytest
from django.db.models import Count

from sources import git, git_roots, jobs, pipeline, queues
from sources.config import git_config
from sources.job_report import job_outcome_read
from sources.models import COMMIT_KEY, Chunk, FileText, IndexJob, JobStatus, Source, WorkspaceRoot
from tests.gitrepo import Origin

pytestmark = pytest.mark.django_db


@pytest.fixture
def origin(tmp_path, settings) -> Origin:
    settings.VAR_DIR = tmp_path / "var"
    # The remote's directory only: a git root's checkout (under VAR_DIR/git) is allowed by itself.
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path / "remote")]
    repo = Origin(tmp_path / "remote")
    repo.commit(
        "first",
        {
            "README.md": "# Readme\n\nThe readme of the repository.\n",
            "pkg/alpha.py": "def alpha_function():\n    return 'alpha'\n",
            "pkg/beta.py": "def beta_function():\n    return 'beta'\n",
            "docs/guide.md": "# Guide\n\nHow the harbour crane lifts containers.\n",
        },
    )
    repo.push()
    return repo


def git_root(origin: Origin, **fields) -> WorkspaceRoot:
    path = git_roots.root_git_path(name="repo", config=git_config())
    return WorkspaceRoot.objects.create(
        name="repo", path=path, git_url=origin.url, git_branch=origin.branch, cooldown_seconds=0, **fields
    )


def run(root: WorkspaceRoot, *, trigger: str = "push") -> IndexJob:
    """Ask for a job as the webhook (push) or the admin does, and run it here through the real pipeline."""
    job, created = jobs.root_job_request(root_id=root.pk, trigger=trigger, ignore_cooldown=True)
    assert created
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    job.refresh_from_db()
    root.refresh_from_db()
    return job


def stored(root: WorkspaceRoot) -> dict[str, int]:
    rows = Chunk.objects.filter(source__root=root).values("path").annotate(n=Count("id"))
    return {row["path"]: row["n"] for row in rows}


@pytest.fixture
def indexed(origin) -> WorkspaceRoot:
    root = git_root(origin)
    job = run(root, trigger="admin")
    assert job.status == JobStatus.SUCCEEDED, job.message
    return root


def test_a_git_root_is_cloned_and_indexed_at_its_branch_tip(origin, indexed):
    tip = origin.git("rev-parse", "HEAD")
    assert indexed.git_commit == tip and indexed.git_indexed_branch == "main" and not indexed.git_error
    assert set(stored(indexed)) == {"README.md", "pkg/alpha.py", "pkg/beta.py", "docs/guide.md"}
    assert {chunk.metadata[COMMIT_KEY] for chunk in Chunk.objects.filter(source__root=indexed)} == {tip}


def test_a_push_re_indexes_only_the_paths_its_commits_changed(origin, indexed):
    tip = origin.commit(
        "change",
        {"pkg/alpha.py": "def alpha_function():\n    return 'zebra crossing'\n", "pkg/gamma.py": "GAMMA = 3\n"},
        delete=("pkg/beta.py",),
    )
    origin.push()
    job = run(indexed)
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert job.paths == ["pkg/alpha.py", "pkg/beta.py", "pkg/gamma.py"]
    assert (job.files_changed, job.files_deleted, job.files_unchanged) == (2, 1, 0)
    assert set(stored(indexed)) == {"README.md", "pkg/alpha.py", "pkg/gamma.py", "docs/guide.md"}
    alpha = Chunk.objects.get(path="pkg/alpha.py")
    assert "zebra crossing" in alpha.content and alpha.metadata[COMMIT_KEY] == tip
    assert Chunk.objects.get(path="README.md").metadata[COMMIT_KEY] != tip  # unchanged: still the commit it was read at
    assert indexed.git_commit == tip


def test_a_renamed_file_keeps_its_vectors(origin, indexed):
    before = Chunk.objects.get(path="docs/guide.md")
    tip = origin.commit("move", rename={"docs/guide.md": "manual/guide.md"})
    origin.push()
    job = run(indexed)
    assert job.status == JobStatus.SUCCEEDED, job.message
    assert (job.chunks_embedded, job.files_changed, job.files_deleted) == (0, 1, 0)
    after = Chunk.objects.get(path="manual/guide.md")
    assert after.pk == before.pk and list(after.embedding) == list(before.embedding)
    assert after.metadata[COMMIT_KEY] == tip
    assert "docs/guide.md" not in stored(indexed)
    # Its stored text (what grep searches) moved with it.
    texts = set(FileText.objects.filter(source__root=indexed).values_list("path", flat=True))
    assert "manual/guide.md" in texts and "docs/guide.md" not in texts


def test_a_fetch_with_no_new_commit_embeds_nothing_and_says_up_to_date(indexed, admin_client):
    job = run(indexed, trigger="fetch")
    assert job.status == JobStatus.SUCCEEDED
    assert (job.files_total, job.chunks_embedded) == (0, 0)
    outcome = job_outcome_read(job)
    assert outcome is not None
    assert (outcome.level, outcome.title) == ("success", "Up to date")
    assert outcome.text == f"commit {indexed.git_commit[:12]} is indexed; no file changed since"
    listing = admin_client.get("/admin/sources/workspaceroot/").content.decode()
    assert '<b class="status status-success">Up to date</b>' in listing and "Nothing to index" not in listing


def test_a_force_push_hands_the_rebuild_to_the_bulk_queue_and_rebuilds_in_a_new_generation(origin, indexed):
    source = Source.objects.get(pk=indexed.source_id)
    origin.git("reset", "--quiet", "--hard", "HEAD~0")
    origin.git("checkout", "--quiet", "--orphan", "rewritten")
    origin.git("rm", "--quiet", "-r", "--cached", ".")
    origin.work.joinpath("pkg/beta.py").unlink()
    tip = origin.commit("history rewritten", {"pkg/alpha.py": "def alpha_function():\n    return 'rewritten'\n"})
    origin.push(force=True, branch="main")
    job = run(indexed)
    assert job.status == JobStatus.QUEUED and job.trigger == git_roots.REBUILD_TRIGGER, job.message
    assert "no longer in main's history" in job.message
    assert stored(indexed)["pkg/beta.py"]  # the old index still serves until the rebuild flips
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    job.refresh_from_db()
    indexed.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.message.startswith("rebuilt at"), job.message
    assert Source.objects.get(pk=source.pk).active_generation == source.active_generation + 1
    assert set(stored(indexed)) == {"README.md", "pkg/alpha.py", "docs/guide.md"}
    assert set(Chunk.objects.filter(source__root=indexed).values_list("generation", flat=True)) == {
        source.active_generation + 1
    }
    assert indexed.git_commit == tip


@pytest.mark.parametrize(
    ("files", "document"),
    [
        ({"manual/report.pdf": "%PDF-1.4\n% a hostile document\n", "pkg/alpha.py": "ALPHA = 1\n"}, "report.pdf"),
        ({"docs/page.html": "<!DOCTYPE html>\n<html><body><p>Crane</p></body></html>\n"}, "page.html"),
        ({"data/rows.csv": "a,b\n1,2\n"}, "rows.csv"),
    ],
)
def test_a_push_with_a_document_to_extract_is_handed_to_the_bulk_queue(origin, indexed, files, document):
    """Extraction runs for up to RAG_EXTRACT_TIMEOUT_SECONDS a file: a push of N hostile PDFs held the interactive
    worker N times that while saves waited (issue 39 review, item 3)."""
    origin.commit("documents", files)
    origin.push()
    job, created = jobs.root_job_request(root_id=indexed.pk, trigger="push", ignore_cooldown=True)
    assert created and queues.job_queue(job) == queues.INTERACTIVE  # a push is sent to the interactive worker
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.trigger == git_roots.REBUILD_TRIGGER, job.message
    assert document in job.message and "bulk queue" in job.message
    assert queues.job_queue(job) == queues.BULK
    assert not any(path.endswith(document) for path in stored(indexed))  # nothing read or extracted here
    assert "ALPHA = 1" not in Chunk.objects.get(path="pkg/alpha.py").content


def test_a_push_of_code_text_and_html_fragments_stays_on_the_interactive_queue(origin, indexed):
    tip = origin.commit(
        "code",
        {
            "pkg/gamma.py": "GAMMA = 3\n",
            "docs/notes.md": "# Notes\n\nThe crane's notes.\n",
            "templates/base.html": "{% block content %}<p>Crane</p>{% endblock %}\n",  # a template: read as text
        },
        delete=("pkg/beta.py",),
    )
    origin.push()
    job = run(indexed)
    assert job.status == JobStatus.SUCCEEDED and job.trigger == "push", job.message
    assert job.paths == ["docs/notes.md", "pkg/beta.py", "pkg/gamma.py", "templates/base.html"]
    assert indexed.git_commit == tip and "templates/base.html" in stored(indexed)


TOKEN_URL = "https://ghp_" + "abcdef0123456789abcdef@github.com/org/repo.git"


def clone_config(root: WorkspaceRoot) -> str:
    return (Path(git_roots.root_repo(root, git_config()).git_dir) / "config").read_text()


def test_a_token_kept_in_a_clone_s_remote_url_is_removed_by_the_next_job_even_a_failing_one(indexed):
    """Migration 0020 removed a token from the stored URL, not from the clone's ``remote.origin.url`` (issue 39
    review, 10b); a migrated root's jobs fail before the fetch that would set the URL again."""
    git_dir = git_roots.root_repo(indexed, git_config()).git_dir
    Origin._git(Path(git_dir), "config", "--file", "config", "remote.origin.url", TOKEN_URL)
    Origin._git(Path(git_dir), "config", "--file", "config", "--add", "remote.origin.pushurl", "ssh://git:pw1234@h/x")
    assert "ghp_" in clone_config(indexed)
    WorkspaceRoot.objects.filter(pk=indexed.pk).update(git_credential_legacy="a user name or token in the URL")
    job = run(indexed)
    assert job.status == JobStatus.FAILED and "no longer accepted" in job.message, job.message
    config = clone_config(indexed)
    assert "ghp_" not in config and "pw1234" not in config
    assert "url = https://github.com/org/repo.git" in config and "pushurl = ssh://git@h/x" in config


def test_a_starting_worker_removes_tokens_from_every_clone_s_remote_url(indexed, settings):
    from celery.signals import worker_ready

    from rag_site.celery import app  # noqa: F401 - installing the app's hooks connects the signal
    from sources.celery_hooks import git_clones_scrub

    assert git_clones_scrub in [receiver for _, receiver in worker_ready.receivers]
    git_dir = git_roots.root_repo(indexed, git_config()).git_dir
    Origin._git(Path(git_dir), "config", "--file", "config", "remote.origin.url", TOKEN_URL)
    other = root_git_path_clone(settings, "https://bob:" + "hunter22@git.example.org/x.git")
    git_clones_scrub()
    assert "ghp_" not in clone_config(indexed) and "hunter22" not in (other / "config").read_text()
    assert git_roots.clones_scrub(config=git_config()) == 0  # clean clones are left as they are


def root_git_path_clone(settings, url: str) -> Path:
    """A clone with no root (its root deleted while the clone stayed, or disabled)."""
    clone = Path(settings.VAR_DIR) / "git" / "orphan-0000.git"
    Origin._git(clone.parent, "init", "--quiet", "--bare", str(clone))
    Origin._git(clone, "config", "--file", "config", "remote.origin.url", url)
    return clone


def test_switching_the_branch_rebuilds_the_root(origin, indexed):
    origin.git("checkout", "--quiet", "-b", "release")
    origin.commit("release only", {"RELEASE.md": "# Release\n\nShipped to the lighthouse.\n"})
    origin.push(branch="release")
    WorkspaceRoot.objects.filter(pk=indexed.pk).update(git_branch="release")
    job = run(indexed, trigger="admin")
    assert job.status == JobStatus.SUCCEEDED and job.message.startswith("rebuilt at"), job.message
    assert "RELEASE.md" in stored(indexed) and indexed.git_indexed_branch == "release"


def test_an_unreachable_remote_fails_the_job_with_a_redacted_message(origin, settings, tmp_path):
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "local.toml").write_text('host = "127.0.0.1:1"\ntoken = "alice:tok-very-secret-value"\n')
    settings.RAG_GIT_CREDENTIALS_DIR = str(credentials)
    root = git_root(origin, git_credential="local")
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url="https://127.0.0.1:1/org/repo.git")
    root.refresh_from_db()
    job = run(root, trigger="admin")
    assert job.status == JobStatus.FAILED and "git fetch failed" in job.message, job.message
    assert "tok-very-secret-value" not in job.message and "alice" not in job.message
    assert root.git_error and "tok-very-secret-value" not in root.git_error


def test_a_credential_that_is_not_bound_is_named_in_the_error(origin, settings, tmp_path):
    settings.RAG_GIT_CREDENTIALS_DIR = str(tmp_path)
    root = git_root(origin, git_credential="not-bound")
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url="https://127.0.0.1:1/org/repo.git")
    job = run(root, trigger="admin")
    assert job.status == JobStatus.FAILED
    assert "no credential 'not-bound' is bound" in job.message


def test_submodules_and_lfs_pointers_are_skipped_with_their_reason(origin, indexed):
    lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "0" * 64 + "\nsize 12345\n"
    sha = origin.git("rev-parse", "HEAD")
    (origin.work / "data").mkdir()
    (origin.work / "data" / "weights.txt").write_text(lfs)
    origin.git("add", "data/weights.txt")
    origin.git("update-index", "--add", "--cacheinfo", f"160000,{sha},vendor/lib")
    origin.git("commit", "--quiet", "-m", "lfs and a submodule")
    origin.push()
    job = run(indexed)
    assert job.status == JobStatus.SUCCEEDED, job.message
    reasons = {error["path"]: error["reason"] for error in job.errors}
    assert reasons == {"vendor/lib": git.SUBMODULE_REASON, "data/weights.txt": git.LFS_REASON}
    assert job.files_skipped == 2
    assert "data/weights.txt" not in stored(indexed)


def test_a_file_url_outside_the_base_directories_is_refused(origin, settings, tmp_path):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path / "elsewhere")]
    job = run(git_root(origin), trigger="admin")
    assert job.status == JobStatus.FAILED and "must lie under RAG_ROOT_BASE_DIRS" in job.message
    assert not Chunk.objects.exists()


@pytest.mark.parametrize(("url", "words"), [("https://[github.com/x", "does not parse"), ("file:///x%00y", "NUL")])
def test_a_stored_url_that_does_not_parse_fails_the_job_with_the_url_s_problem(origin, url, words):
    """Saved before the check knew it (or written to the database directly): a refusal, never "unexpected error"."""
    root = git_root(origin)
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url=url)
    root.refresh_from_db()
    job = run(root, trigger="admin")
    assert job.status == JobStatus.FAILED and words in job.message and "unexpected" not in job.message, job.message


@pytest.fixture
def outside(tmp_path) -> Origin:
    """A repository outside RAG_ROOT_BASE_DIRS (the origin fixture's base is tmp_path/remote)."""
    repo = Origin(tmp_path / "outside")
    repo.commit("secret", {"notes/private.md": "# Private\n\nThe vault opens with the heron code.\n"})
    repo.push()
    return repo


def test_a_gitfile_inside_the_base_directories_cannot_lead_git_outside_them(origin, outside, tmp_path):
    worktree = tmp_path / "remote" / "innocent"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {outside.bare}\n")
    root = git_root(origin)
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url=f"file://{worktree}")
    job = run(root, trigger="admin")
    assert job.status == JobStatus.FAILED and "must lie under RAG_ROOT_BASE_DIRS" in job.message, job.message
    assert str(outside.bare) in job.message
    assert not Chunk.objects.filter(path="notes/private.md").exists()


def test_alternates_inside_the_base_directories_cannot_lead_git_outside_them(origin, outside, tmp_path):
    borrowed = tmp_path / "remote" / "borrowed.git"
    Origin._git(tmp_path, "init", "--quiet", "--bare", "-b", "main", str(borrowed))
    (borrowed / "objects" / "info" / "alternates").write_text(f"{outside.bare / 'objects'}\n")
    Origin._git(borrowed, "update-ref", "refs/heads/main", outside.git("rev-parse", "HEAD"))
    root = git_root(origin)
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url=f"file://{borrowed}")
    job = run(root, trigger="admin")
    assert job.status == JobStatus.FAILED and "must lie under RAG_ROOT_BASE_DIRS" in job.message, job.message
    assert not Chunk.objects.filter(path="notes/private.md").exists()


def test_a_percent_encoded_parent_in_a_file_url_cannot_leave_the_base_directories(origin, outside, tmp_path):
    root = git_root(origin)
    escape = f"file://{tmp_path}/remote/%2e%2e/outside/origin.git"
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_url=escape)
    job = run(root, trigger="admin")
    assert job.status == JobStatus.FAILED and "must lie under RAG_ROOT_BASE_DIRS" in job.message, job.message
    assert not Chunk.objects.filter(path="notes/private.md").exists()


PERMALINK = "https://git.example.org/org/repo/blob/{commit}/{path}#L{start}-L{end}"


def test_hits_context_and_the_viewer_show_the_commit_and_the_permalink(origin, indexed, key_client, person, client):
    WorkspaceRoot.objects.filter(pk=indexed.pk).update(git_permalink=PERMALINK)
    tip = indexed.git_commit
    hit = next(
        h
        for h in key_client.post(
            "/api/v1/search", {"query": "harbour crane lifts containers"}, content_type="application/json"
        ).json()["hits"]
        if h["path"] == "docs/guide.md"
    )
    assert hit["commit"] == tip
    assert (
        hit["permalink"]
        == f"https://git.example.org/org/repo/blob/{tip}/docs/guide.md#L{hit['start_line']}-L{hit['end_line']}"
    )
    parts = key_client.post(
        "/api/v1/context",
        {"query": "harbour crane lifts containers", "budget_tokens": 2000},
        content_type="application/json",
    ).json()["parts"]
    part = next(p for p in parts if p["path"] == "docs/guide.md")
    assert part["commit"] == tip and part["permalink"].startswith(f"https://git.example.org/org/repo/blob/{tip}/")
    page = client.get(f"/view/file/{indexed.pk}/docs/guide.md").content.decode()
    assert tip[:12] in page and f"https://git.example.org/org/repo/blob/{tip}/docs/guide.md#L1-L3" in page


def test_deleting_a_git_root_removes_its_clone_and_checkout(indexed, django_capture_on_commit_callbacks):
    checkout = indexed.path
    clone = git_roots.root_repo(indexed, git_config()).git_dir
    assert os.path.isdir(checkout) and os.path.isdir(clone)
    with django_capture_on_commit_callbacks(execute=True):
        indexed.delete()
    assert not os.path.exists(checkout) and not os.path.exists(clone)
    assert os.path.isdir(git_config().directory)  # the other roots' clones live beside them
