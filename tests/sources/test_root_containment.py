"""A root serves its own directory only: never another one swapped in at its path, never a file hard-linked in.

Issue 22, findings 2 and 3, reproduced with a real layout: a base directory
(RAG_ROOT_BASE_DIRS) holding the roots of two bots, indexed by the real
pipeline and read back through search, read, grep, the viewer and jobs.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from access.models import AccessGrant
from sources import jobs
from sources.models import Chunk, IndexedFile, IndexJob, JobStatus, WorkspaceRoot
from tests.conftest import api_client, index_root

pytestmark = pytest.mark.django_db

ALPHA = {"notes.md": "# Alpha notes\n\nThe pelican plan for the alpha bot.\n"}
BETA = {
    "notes.md": "# Beta notes\n\nThe walrus roadmap of the beta bot.\n",
    "pricing.md": "# Pricing\n\nThe walrus discount stays confidential.\n",
    "plan.py": "def walrus_plan():\n    return 'beta only'\n",
    "team.md": "# Team\n\nWho runs the walrus launch.\n",
}


def make_root(base: Path, name: str, files: dict[str, str], **fields) -> WorkspaceRoot:
    directory = base / name
    directory.mkdir()
    for relative, text in files.items():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_text(text)
    root = WorkspaceRoot.objects.create(name=name, path=str(directory), cooldown_seconds=0, **fields)
    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED, job.message
    return root


@pytest.fixture
def base(tmp_path, settings) -> Path:
    directory = tmp_path / "base"
    directory.mkdir()
    settings.RAG_ROOT_BASE_DIRS = [str(directory)]
    return directory


@pytest.fixture
def alpha(base) -> WorkspaceRoot:
    return make_root(base, "alpha", ALPHA, bot_id="bot-alpha")


@pytest.fixture
def beta(base) -> WorkspaceRoot:
    return make_root(base, "beta", BETA, bot_id="bot-beta")


@pytest.fixture
def outside(tmp_path_factory) -> Path:
    """A directory outside RAG_ROOT_BASE_DIRS (a stand-in for /etc)."""
    directory = tmp_path_factory.mktemp("etc")
    (directory / "passwd").write_text("root:x:0:0:osprey:/root:/bin/bash\n")
    return directory


@pytest.fixture
def alpha_client():
    return api_client(name="alpha bot", bot_id="bot-alpha")


@pytest.fixture
def alpha_person(client, django_user_model):
    person = django_user_model.objects.create_user("alpha-person", password="a-long-test-password")
    AccessGrant.objects.create(user=person, bot_id="bot-alpha")
    client.force_login(person)
    return client


def run_job(root: WorkspaceRoot) -> IndexJob:
    """One index job through the Celery task's body, in this process: the path that records a failure on the job."""
    from sources.tasks import root_index_task

    job, created = jobs.root_job_request(root_id=root.pk, force=False, trigger="test")
    assert created
    root_index_task(job.pk)
    job.refresh_from_db()
    return job


def searched(client, query: str) -> list[dict]:
    response = client.post(
        "/api/v1/search", data=json.dumps({"query": query, "mode": "lexical"}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()["hits"]


def grep(client, **payload):
    return client.post("/api/v1/grep", data=json.dumps(payload), content_type="application/json")


def swap_for_symlink(root: WorkspaceRoot, target: Path) -> None:
    directory = Path(root.path)
    directory.rename(directory.with_name(directory.name + ".old"))
    directory.symlink_to(target, target_is_directory=True)


# Finding 2: a root swapped for a symlink to another root inside the base directories.


def test_a_root_swapped_for_a_symlink_to_another_root_is_refused_by_read_grep_and_the_viewer(
    alpha, beta, alpha_client, alpha_person
):
    assert "pelican" in alpha_client.get("/api/v1/read", {"root": "alpha", "path": "notes.md"}).json()["content"]
    swap_for_symlink(alpha, Path(beta.path))

    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "notes.md"})
    assert read.status_code == 409, read.content
    assert "walrus" not in read.content.decode()
    assert "no longer the directory it was pinned to" in read.json()["error"]
    assert "passes through a symlink" in read.json()["error"]

    named = grep(alpha_client, pattern="walrus", root="alpha")
    assert named.status_code == 409 and "walrus" not in named.content.decode()
    everywhere = grep(alpha_client, pattern="walrus")
    assert everywhere.status_code == 200 and everywhere.json()["matches"] == []

    page = alpha_person.get(f"/view/file/{alpha.pk}/notes.md")
    assert page.status_code == 409 and "walrus" not in page.content.decode()
    assert "no longer the directory it was pinned to" in page.content.decode()


def test_a_job_of_a_swapped_root_fails_unread_and_withdraws_its_chunks(alpha, beta, alpha_client):
    assert [hit["path"] for hit in searched(alpha_client, "pelican")] == ["notes.md"]
    swap_for_symlink(alpha, Path(beta.path))

    job = run_job(alpha)
    assert job.status == JobStatus.FAILED
    assert "passes through a symlink" in job.message and "nothing was read" in job.message
    assert "1 stored chunks were removed from search" in job.message
    assert (job.files_total, job.chunks_embedded) == (0, 0)
    assert searched(alpha_client, "walrus") == [] and searched(alpha_client, "pelican") == []
    assert not Chunk.objects.filter(source__key=f"root:{alpha.pk}").exists()
    assert not IndexedFile.objects.filter(source__key=f"root:{alpha.pk}").exists()
    assert Chunk.objects.filter(source__key=f"root:{beta.pk}").count() == len(BETA)  # beta keeps its own


def test_a_root_replaced_by_another_directory_fails_its_job_and_is_refused(alpha, beta, alpha_client):
    directory = Path(alpha.path)
    directory.rename(directory.with_name("alpha.old"))
    shutil.copytree(beta.path, directory)  # a real directory at the same path: only its identity differs

    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "notes.md"})
    assert read.status_code == 409 and "walrus" not in read.content.decode()
    job = run_job(alpha)
    assert job.status == JobStatus.FAILED and "another directory" in job.message and "nothing was read" in job.message
    assert searched(alpha_client, "walrus") == [] and searched(alpha_client, "pelican") == []


# Finding 3: a hard link to a file outside the root.


def test_a_hard_link_to_a_file_outside_the_root_is_skipped_and_never_served(base, outside, alpha_client, alpha_person):
    directory = base / "alpha"
    (directory / "src").mkdir(parents=True)
    (directory / "src" / "readme.md").write_text("# Readme\n\nThe pelican service.\n")
    os.link(outside / "passwd", directory / "src" / "passwd.txt")
    root = WorkspaceRoot.objects.create(name="alpha", path=str(directory), bot_id="bot-alpha")

    job = index_root(root)
    assert job.status == JobStatus.SUCCEEDED
    assert job.errors == [{"path": "src/passwd.txt", "reason": "hard link (2 links; hard links are not indexed)"}]
    assert searched(alpha_client, "osprey") == []
    assert not Chunk.objects.filter(content__contains="osprey").exists()

    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "src/passwd.txt"})
    assert read.status_code == 404 and "osprey" not in read.content.decode()
    assert grep(alpha_client, pattern="osprey").json()["matches"] == []
    assert "osprey" not in alpha_person.get(f"/view/file/{root.pk}/src/passwd.txt").content.decode()


def test_an_indexed_file_replaced_by_a_hard_link_to_outside_is_not_served(alpha, outside, alpha_client, alpha_person):
    target = Path(alpha.path) / "notes.md"
    target.unlink()
    os.link(outside / "passwd", target)

    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "notes.md"})
    assert read.status_code == 422 and "osprey" not in read.content.decode()
    assert "hard link" in read.json()["error"]
    answer = grep(alpha_client, pattern="osprey").json()
    assert answer["matches"] == []  # grep searches the text indexed: the outside file's was never read
    page = alpha_person.get(f"/view/file/{alpha.pk}/notes.md")
    assert "osprey" not in page.content.decode() and "hard link" in page.content.decode()

    job = run_job(alpha)
    assert job.status == JobStatus.SUCCEEDED and job.files_deleted == 1
    assert job.errors == [{"path": "notes.md", "reason": "hard link (2 links; hard links are not indexed)"}]
    assert searched(alpha_client, "osprey") == [] and searched(alpha_client, "pelican") == []


# Pinning: what an admin confirms is what jobs, read, grep and the viewer accept.


def root_form(instance: WorkspaceRoot | None = None, **data):
    from surfaces.admin.roots import RootForm

    fields = {
        "name": "alpha",
        "include_globs": "*.md *.py",
        "exclude_dirs": ".git",
        "max_file_bytes": 500000,
        "cooldown_seconds": 0,
        "reverify_minutes": 0,
        "enabled": "on",
        "scan_secrets": "on",
    }
    if instance is not None:
        instance = WorkspaceRoot.objects.get(pk=instance.pk)  # as the admin loads it (a form changes its instance)
        fields.update(name=instance.name, path=instance.path, bot_id=instance.bot_id)
    return RootForm(data={**fields, **data}, instance=instance)


def test_the_admin_pins_a_new_root_and_refuses_a_symlinked_path_unless_confirmed(base, beta):
    (base / "alpha").mkdir()
    link = base / "current"
    link.symlink_to(base / "alpha", target_is_directory=True)

    refused = root_form(path=str(link))
    assert not refused.is_valid()
    assert refused.errors["path"] == [
        f"'{link}' passes through a symlink (it leads to '{base / 'alpha'}' now): enter "
        "the real path, or confirm to pin the directory the symlink leads to now."
    ]
    confirmed = root_form(path=str(link), confirm_directory="on", bot_id="bot-alpha")
    assert confirmed.is_valid(), confirmed.errors
    root = confirmed.save()
    info = os.stat(base / "alpha")
    assert (root.path, root.directory_identity, root.symlink_target) == (
        str(link),
        f"{info.st_dev}:{info.st_ino}",
        str(base / "alpha"),
    )
    (base / "alpha" / "notes.md").write_text(ALPHA["notes.md"])
    assert run_job(root).status == JobStatus.SUCCEEDED

    link.unlink()
    link.symlink_to(beta.path, target_is_directory=True)  # the confirmed link now leads elsewhere
    job = run_job(root)
    assert job.status == JobStatus.FAILED and f"not to {base / 'alpha'} as confirmed" in job.message
    assert not Chunk.objects.filter(source__key=f"root:{root.pk}").exists()

    root.refresh_from_db()
    editing = root_form(root, channels="ops")  # saving other fields must not pin the swap silently
    assert not editing.is_valid() and "passes through a symlink" in editing.errors["path"][0]
    repinned = root_form(root, confirm_directory="on")
    assert repinned.is_valid(), repinned.errors
    repinned.save()
    root.refresh_from_db()
    assert root.symlink_target == beta.path and root.directory_identity != f"{info.st_dev}:{info.st_ino}"
    assert run_job(root).status == JobStatus.SUCCEEDED


def test_a_replaced_directory_needs_the_admin_to_confirm_it(alpha, beta, alpha_client):
    directory = Path(alpha.path)
    directory.rename(directory.with_name("alpha.old"))
    shutil.copytree(directory.with_name("alpha.old"), directory)  # e.g. restored from a backup
    alpha.refresh_from_db()

    editing = root_form(alpha, channels="ops")
    assert not editing.is_valid() and "leads to another directory than the one pinned" in editing.errors["path"][0]
    assert alpha_client.get("/api/v1/read", {"root": "alpha", "path": "notes.md"}).status_code == 409
    confirmed = root_form(alpha, confirm_directory="on")
    assert confirmed.is_valid(), confirmed.errors
    confirmed.save()
    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "notes.md"})
    assert read.status_code == 200 and "pelican" in read.json()["content"], read.content
    assert run_job(alpha).status == JobStatus.SUCCEEDED


def test_a_root_saved_before_pinning_is_pinned_by_its_next_job_unless_its_path_is_a_symlink(base, beta):
    (base / "alpha").mkdir()
    (base / "alpha" / "notes.md").write_text(ALPHA["notes.md"])
    root = WorkspaceRoot.objects.create(name="alpha", path=str(base / "alpha"), bot_id="bot-alpha")
    assert root.directory_identity == ""
    assert run_job(root).status == JobStatus.SUCCEEDED
    root.refresh_from_db()
    info = os.stat(base / "alpha")
    assert root.directory_identity == f"{info.st_dev}:{info.st_ino}"

    unpinned = WorkspaceRoot.objects.create(name="gamma", path=str(base / "gamma"))
    (base / "gamma").symlink_to(beta.path, target_is_directory=True)
    job = run_job(unpinned)
    assert job.status == JobStatus.FAILED and "passes through a symlink" in job.message
    unpinned.refresh_from_db()
    assert unpinned.directory_identity == ""


def test_a_root_may_allow_hard_links_whose_every_link_is_inside_it(base, outside, alpha_client):
    directory = base / "alpha"
    (directory / "docs").mkdir(parents=True)
    (directory / "guide.md").write_text("# Guide\n\nThe heron procedure.\n")
    os.link(directory / "guide.md", directory / "docs" / "guide.md")
    os.link(outside / "passwd", directory / "passwd.md")
    root = WorkspaceRoot.objects.create(name="alpha", path=str(directory), bot_id="bot-alpha", hard_links_inside=True)

    job = index_root(root)
    assert job.errors == [
        {"path": "passwd.md", "reason": "hard link (2 links, 1 of them among this root's files; every link must be)"}
    ]
    assert sorted(hit["path"] for hit in searched(alpha_client, "heron")) == ["docs/guide.md", "guide.md"]
    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "docs/guide.md"})
    assert read.status_code == 200 and "heron" in read.json()["content"]
    assert len(grep(alpha_client, pattern="heron").json()["matches"]) == 2
    root.hard_links_inside = False
    root.save()
    refused = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "docs/guide.md"})
    assert refused.status_code == 422 and "hard links are not served" in refused.json()["error"]
    root.hard_links_inside = True
    root.save()

    (directory / "guide.md").unlink()
    os.link(outside / "passwd", directory / "guide.md")  # swapped for a link to outside after indexing
    read = alpha_client.get("/api/v1/read", {"root": "alpha", "path": "guide.md"})
    assert read.status_code == 422 and "osprey" not in read.content.decode()
    assert "changed since it was indexed" in read.json()["error"]
    # Grep searches the text indexed (the heron guide's), never what a path leads to now.
    found = grep(alpha_client, pattern="heron|osprey", regex=True).json()
    assert [m["path"] for m in found["matches"]] == ["docs/guide.md", "guide.md"]
    assert all("osprey" not in m["text"] for m in found["matches"])
    job = index_root(root)
    assert job.files_deleted == 1 and [hit["path"] for hit in searched(alpha_client, "heron")] == ["docs/guide.md"]
    assert searched(alpha_client, "osprey") == []
