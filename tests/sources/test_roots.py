"""Indexing workspace roots through the real pipeline (PostgreSQL, MiniLM)."""

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import Count

from access.scope import Scope
from kernel.errors import ApplicationError, Cooldown
from retrieval.search import Mode, chunks_search
from sources import jobs, pipeline, roots
from sources.chunking import chunk_text
from sources.connectors import folder
from sources.models import Chunk, FileText, IndexedFile, IndexJob, JobStatus, Segment, Source, WorkspaceRoot
from tests.conftest import index_root
from tests.tree import tree_make

pytestmark = pytest.mark.django_db


def index(root: WorkspaceRoot, *, force: bool = False) -> IndexJob:
    """An ordinary job (the ``root`` fixture has no cooldown); ``force`` re-embeds even unchanged files."""
    return index_root(root, force=force)


@pytest.fixture
def root(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    return WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=0)


def stored(root: WorkspaceRoot) -> dict[str, int]:
    rows = Chunk.objects.filter(source__key__startswith=f"root:{root.pk}").values("path").annotate(n=Count("id"))
    return {row["path"]: row["n"] for row in rows}


def test_edit_delete_and_rename_touch_exactly_those_files(root):
    directory = Path(root.path)
    paths = tree_make(directory, files=240)
    first = index(root)
    assert first.status == JobStatus.SUCCEEDED, first.message
    assert (first.files_total, first.files_changed, first.files_skipped) == (240, 240, 0)
    assert set(stored(root)) == set(paths)
    assert first.chunks_embedded == sum(stored(root).values())
    assert {c.language for c in Chunk.objects.all()} >= {"python", "typescript", "markdown", "go"}

    unchanged = index(root)
    assert (unchanged.files_unchanged, unchanged.files_changed, unchanged.chunks_embedded) == (240, 0, 0)

    edited = directory / paths[0]
    before = {c.content for c in chunk_text(edited.read_text(), paths[0])}
    edited.write_text(edited.read_text() + "\n\ndef zebra_sorting_helper():\n    return 'zebra'\n")
    expected = chunk_text(edited.read_text(), paths[0])
    after_edit = index(root)
    assert (after_edit.files_changed, after_edit.files_unchanged) == (1, 239)
    # Only the chunks whose text changed are embedded: the others keep their vectors.
    assert after_edit.chunks_embedded == len([c for c in expected if c.content not in before]) >= 1
    assert stored(root)[paths[0]] == len(expected) == after_edit.chunks_written
    assert not Chunk.objects.filter(vector_pending=True).exists()
    assert not Chunk.objects.filter(embedding__isnull=True).exists()

    (directory / paths[1]).unlink()
    renamed_from, renamed_to = paths[2], paths[2].replace("guide_", "renamed_")
    (directory / renamed_from).rename(directory / renamed_to)
    after_moves = index(root)
    assert (after_moves.files_deleted, after_moves.files_changed) == (2, 1)
    assert paths[1] not in stored(root) and renamed_from not in stored(root) and renamed_to in stored(root)
    hits = chunks_search(query="zebra sorting helper", mode=Mode.LEXICAL)
    assert hits[0].chunk.path == paths[0] and hits[0].chunk.symbol == "zebra_sorting_helper"
    assert not IndexedFile.objects.filter(path__in=[paths[1], renamed_from]).exists()


def vectors(root: WorkspaceRoot) -> dict[tuple[str, int], tuple[int, list[float]]]:
    rows = Chunk.objects.filter(source__key__startswith=f"root:{root.pk}").values_list(
        "path", "chunk_index", "pk", "embedding"
    )
    return {(path, index): (pk, list(embedding)) for path, index, pk, embedding in rows}


def test_a_forced_job_re_embeds_every_file_and_replaces_its_chunks(root):
    tree_make(Path(root.path), files=12)
    index(root)
    before = vectors(root)

    def ranked() -> list[tuple[str, int]]:
        return [(h.chunk.path, h.chunk.chunk_index) for h in chunks_search(query="handler for the billing service")]

    results = ranked()
    unforced = index(root)
    assert (unforced.files_unchanged, unforced.files_changed, unforced.chunks_embedded) == (12, 0, 0)
    assert vectors(root) == before

    forced = index(root, force=True)
    assert forced.status == JobStatus.SUCCEEDED, forced.message
    assert (forced.files_changed, forced.files_unchanged, forced.files_deleted) == (12, 0, 0)
    assert forced.chunks_embedded == forced.chunks_deleted == len(before)
    after = vectors(root)
    assert after.keys() == before.keys() and Chunk.objects.count() == len(before)  # replaced, not duplicated
    assert not {pk for pk, _ in after.values()} & {pk for pk, _ in before.values()}
    assert all(after[key][1] == pytest.approx(before[key][1], abs=1e-3) for key in before)  # same text, same model
    assert IndexedFile.objects.count() == 12
    assert ranked() == results


def test_a_new_long_text_setting_re_embeds_unchanged_files_without_force(root, settings):
    long_line = " ".join(f"pelican{i} flock{i}" for i in range(60))  # far over the model's 256 word pieces
    (Path(root.path) / "notes.md").write_text(f"# Notes\n\n{long_line}\n")
    (Path(root.path) / "short.md").write_text("# Short\n\nA few words.\n")
    settings.RAG_EMBED_LONG_TEXTS = "truncate"
    index(root)
    truncated = vectors(root)
    assert index(root).chunks_embedded == 0 and vectors(root) == truncated  # same settings: nothing re-embedded
    settings.RAG_EMBED_LONG_TEXTS = "pieces"  # part of every document's fingerprint
    job = index(root)
    assert (job.files_changed, job.files_unchanged, job.chunks_embedded) == (2, 0, 2)
    after = vectors(root)
    assert after[("notes.md", 0)][1] != pytest.approx(truncated[("notes.md", 0)][1], abs=1e-3)
    assert after[("short.md", 0)][1] == pytest.approx(truncated[("short.md", 0)][1], abs=1e-3)  # fits either way
    assert index(root).chunks_embedded == 0


def test_a_new_markdown_chunker_version_re_embeds_only_the_markdown_files(root, monkeypatch):
    from dataclasses import replace

    from sources.chunking import STRATEGIES

    directory = Path(root.path)
    (directory / "guide.md").write_text("# Guide\n\nHow to deploy.\n\n## Rollback\n\nUndo the last deploy.\n")
    (directory / "notes.markdown").write_text("# Notes\n\nThe pager rota.\n")
    (directory / "app.py").write_text("def handler():\n    return 'billing'\n\n\nclass Service:\n    pass\n")
    (directory / "todo.txt").write_text("Renew the certificate before June.\n")
    first = index(root)
    assert (first.files_changed, first.status) == (4, JobStatus.SUCCEEDED)
    before = vectors(root)

    monkeypatch.setitem(
        STRATEGIES, "markdown", replace(STRATEGIES["markdown"], version=STRATEGIES["markdown"].version + 1)
    )
    job = index(root)
    markdown = {key for key in before if key[0].endswith((".md", ".markdown"))}
    assert (job.files_changed, job.files_unchanged) == (2, 2)
    assert job.chunks_written == job.chunks_deleted == len(markdown)
    # The new version cut the same chunks: each kept its vector (same text, model and settings), none was embedded.
    assert job.chunks_embedded == 0 and not Chunk.objects.filter(vector_pending=True).exists()
    after = vectors(root)
    assert after.keys() == before.keys()
    re_created = {key for key in after if after[key][0] != before[key][0]}
    assert re_created == markdown  # the Python and text files' chunks are the rows they were
    assert index(root).chunks_embedded == 0


def test_stored_files_keep_the_hash_of_their_text_and_a_fingerprint_of_how_they_were_indexed(root, settings):
    from sources.chunking import chunker_identity
    from sources.ingest import IngestSettings, fingerprint

    text = "# Hash\n\nThe text a bot can check.\n"
    (Path(root.path) / "hash.md").write_text(text)
    index(root)
    state = IndexedFile.objects.get(path="hash.md")
    assert state.content_hash == hashlib.sha256(text.encode()).hexdigest()
    assert state.fingerprint == fingerprint(
        content=state.content_hash,
        model=state.embedding_model.spec.identity,
        config=IngestSettings.current(),
        chunker=chunker_identity("hash.md"),
    )
    assert state.chunking_version == chunker_identity("hash.md")  # the strategy that made its chunks
    settings.RAG_CHUNK_MAX_CHARS = 900  # a chunker setting: the stored chunks are no longer what it would write
    job = index(root)
    # Read and cut again; its one chunk came out the same, so it kept its vector.
    assert (job.files_changed, job.chunks_written, job.chunks_embedded) == (1, 1, 0)
    assert IndexedFile.objects.get(path="hash.md").fingerprint != state.fingerprint


def test_a_forced_job_taken_over_keeps_what_its_earlier_attempt_stored(root):
    paths = tree_make(Path(root.path), files=4)
    index(root)
    job, _ = jobs.root_job_request(root_id=root.pk, force=True, trigger="test")
    job = jobs.job_start(job_id=job.pk)
    # As if the job's first attempt had stored this file before its worker died.
    IndexedFile.objects.filter(path=paths[0]).update(indexed_at=job.started_at + timedelta(seconds=1))
    pipeline.root_index(job=job)
    job.refresh_from_db()
    assert (job.status, job.files_unchanged, job.files_changed) == (JobStatus.SUCCEEDED, 1, 3)


def test_bad_files_are_skipped_and_listed_and_the_job_still_succeeds(root, tmp_path):
    directory = Path(root.path)
    (directory / "good.py").write_text("def ok():\n    return 1\n")
    (directory / "binary.py").write_bytes(b"\x7fELF\x00\x00\x01")
    (directory / "latin.md").write_bytes(b"caf\xe9 au lait")
    (directory / "big.md").write_text("word " * 200_000)
    (tmp_path / "secret.md").write_text("password")
    (directory / "escape.md").symlink_to(tmp_path / "secret.md")
    (directory / "broken.py").symlink_to(directory / "nowhere.py")
    job = index(root)
    assert job.status == JobStatus.SUCCEEDED
    reasons = {error["path"]: error["reason"] for error in job.errors}
    assert set(reasons) == {"binary.py", "latin.md", "big.md", "escape.md", "broken.py"}
    assert reasons["escape.md"] == reasons["broken.py"] == "symlink (not followed)"
    assert job.files_skipped + job.files_failed == 5 and job.files_changed == 1
    assert set(stored(root)) == {"good.py"}


def test_a_file_that_turns_binary_loses_its_chunks(root):
    target = Path(root.path) / "a.py"
    target.write_text("def a():\n    return 1\n")
    index(root)
    target.write_bytes(b"\x00" * 10)
    job = index(root)
    assert job.files_deleted == 1 and stored(root) == {}


def test_a_second_request_gets_the_active_job_and_the_cooldown_is_enforced(root):
    first, created = jobs.root_job_request(root_id=root.pk)
    second, created_again = jobs.root_job_request(root_id=root.pk, force=True)
    assert created and not created_again and second.pk == first.pk
    pipeline.root_index(job=jobs.job_start(job_id=first.pk))
    WorkspaceRoot.objects.filter(pk=root.pk).update(cooldown_seconds=300)
    with pytest.raises(ApplicationError, match="cooldown is 300 s") as refused:
        jobs.root_job_request(root_id=root.pk)
    assert isinstance(refused.value, Cooldown)
    assert jobs.root_job_request(root_id=root.pk, force=True)[1]


def test_segments_scope_and_channels_are_enforced_in_sql(root):
    directory = Path(root.path)
    (directory / "docs").mkdir()
    (directory / "docs" / "ops.md").write_text("# Ops\n\nThe flamingo runbook lives here.\n")
    (directory / "main.py").write_text("def flamingo_public():\n    return 'flamingo'\n")
    Segment.objects.create(root=root, name="docs", path_glob="docs/**", channels="ops-team")
    index(root)
    segment_source = Source.objects.get(key__endswith=":segment:" + str(Segment.objects.get().pk))
    assert Chunk.objects.get(path="docs/ops.md").source_id == segment_source.pk

    def paths(*, bot="", channel=""):
        scope = Scope(bot_ids=(bot,) if bot else (), channels=(channel,) if channel else ())
        return {h.chunk.path for h in chunks_search(query="flamingo", mode=Mode.LEXICAL, scope=scope)}

    assert paths() == {"main.py"}
    assert paths(channel="ops-team") == {"main.py", "docs/ops.md"}
    root.bot_id = "bot-a"
    root.save()  # the scope applies at once, without re-indexing
    assert paths() == set() and paths(bot="bot-b") == set()
    assert paths(bot="bot-a", channel="ops-team") == {"main.py", "docs/ops.md"}
    assert {
        h.chunk.path for h in chunks_search(query="flamingo", mode=Mode.VECTOR, scope=Scope(bot_ids=("bot-a",)))
    } == {"main.py"}


def test_the_root_path_must_be_under_an_allowed_base(root, tmp_path, settings):
    from surfaces.admin.roots import RootForm

    assert roots.root_path_validate(root.path) == root.path
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path / "elsewhere")]
    with pytest.raises(ApplicationError, match="outside the allowed base directories"):
        roots.root_path_validate(root.path)
    with pytest.raises(ApplicationError, match="not an absolute path"):
        roots.root_path_validate("relative/dir")
    form = RootForm(data={"name": "x", "path": root.path + "/../repo"})
    assert not form.is_valid() and "outside the allowed base directories" in form.errors["path"][0]


@pytest.fixture(scope="session")
def second_model(tmp_path_factory) -> str:
    """A different local model (MiniLM plus a 64-dimension projection), built here."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense

    from sources.embedding.local import model_path

    base = SentenceTransformer(model_path("all-MiniLM-L6-v2"), device="cpu")
    projected = SentenceTransformer(modules=[*base, Dense(384, 64)], device="cpu")
    target = tmp_path_factory.mktemp("models") / "minilm-64"
    projected.save(str(target))
    return str(target)


def test_a_segment_model_change_switches_atomically_and_survives_a_crash(root, second_model, monkeypatch, settings):
    settings.RAG_SIMILARITY_THRESHOLD_FILE = -1.0  # every file is a vector hit, whatever its similarity
    directory = Path(root.path)
    (directory / "api").mkdir()
    (directory / "api" / "pelican.py").write_text("def pelican_feeder():\n    return 'fish'\n")
    (directory / "other.py").write_text("def heron():\n    return 1\n")
    segment = Segment.objects.create(root=root, name="api", path_glob="api/**")
    index(root)
    old_model = Chunk.objects.get(path="api/pelican.py").embedding_model

    def vector_paths():
        return [
            (h.chunk.path, h.chunk.embedding_model.dimensions)
            for h in chunks_search(query="feeding pelicans", mode=Mode.VECTOR)
        ]

    segment.embedding_model_name = second_model
    segment.save()
    # The switch crashes after the new generation is written, before the flip.
    monkeypatch.setattr(
        pipeline.run._Run, "_flip", lambda self, plans: (_ for _ in ()).throw(RuntimeError("worker died"))
    )
    with pytest.raises(RuntimeError):
        index(root)
    IndexJob.objects.filter(status="running").update(status="failed")
    assert Chunk.objects.filter(path="api/pelican.py").count() == 2  # old and new generation side by side
    assert ("api/pelican.py", 384) in vector_paths()  # searches still read the old model only
    assert all(dims == 384 for _, dims in vector_paths())

    monkeypatch.undo()
    resumed = index(root)
    assert resumed.status == JobStatus.SUCCEEDED
    assert resumed.files_unchanged >= 1  # the crashed run's work was kept, not redone
    chunk = Chunk.objects.get(path="api/pelican.py")
    assert chunk.embedding_model != old_model and chunk.embedding_model.dimensions == 64
    assert chunk.generation == Source.objects.get(pk=chunk.source_id).active_generation == 1
    assert Chunk.objects.get(path="other.py").embedding_model == old_model  # other segments untouched
    assert ("api/pelican.py", 64) in vector_paths() and ("other.py", 384) in vector_paths()


def test_touched_but_unchanged_files_are_not_embedded_and_their_state_is_refreshed(root, manage_client):
    import os

    paths = tree_make(Path(root.path), files=12)
    index(root)
    for relative in paths:
        os.utime(Path(root.path) / relative, ns=(1_000_000_000, 1_000_000_000))  # e.g. a fresh git checkout
    touched = index(root)
    assert (touched.files_unchanged, touched.files_changed, touched.chunks_embedded) == (12, 0, 0)
    assert set(IndexedFile.objects.values_list("mtime_ns", flat=True)) == {1_000_000_000}
    listed = manage_client.get("/api/v1/roots").json()
    assert [(r["name"], r["last_job"]["id"]) for r in listed] == [("repo", touched.pk)]


def lexical_paths(query: str, *, channel: str = "") -> set[str]:
    scope = Scope(channels=(channel,) if channel else ())
    return {h.chunk.path for h in chunks_search(query=query, mode=Mode.LEXICAL, scope=scope)}


def test_a_segment_gated_after_indexing_stops_serving_its_files_at_once(root):
    directory = Path(root.path)
    (directory / "docs").mkdir()
    (directory / "docs" / "support.md").write_text("# Support\n\nThe walrus escalation path.\n")
    (directory / "main.py").write_text("def walrus_public():\n    return 'walrus'\n")
    index(root)
    before = set(Chunk.objects.filter(path="docs/support.md").values_list("pk", flat=True))
    assert lexical_paths("walrus") == {"main.py", "docs/support.md"}

    segment = Segment.objects.create(root=root, name="support", path_glob="docs/**", channels="support")
    segment.refresh_from_db()  # its source was linked by the save signal
    # No job has run: the file moved to the gated segment in the same transaction, vectors and all.
    assert lexical_paths("walrus") == {"main.py"}
    assert lexical_paths("walrus", channel="support") == {"main.py", "docs/support.md"}
    assert (
        set(Chunk.objects.filter(path="docs/support.md", source=segment.source_id).values_list("pk", flat=True))
        == before
    )
    assert IndexedFile.objects.get(path="docs/support.md").source_id == segment.source_id
    assert FileText.objects.get(path="docs/support.md").source_id == segment.source_id  # grep's text moved too
    queued = IndexJob.objects.get(root=root, status=JobStatus.QUEUED)
    assert queued.trigger == "segments" and not queued.force  # only moved files may need embedding
    IndexJob.objects.filter(pk=queued.pk).update(status=JobStatus.CANCELLED)
    # The next job finds the moved file unchanged in its new segment: nothing to embed.
    assert (index(root).chunks_embedded, Chunk.objects.filter(path="docs/support.md").count()) == (0, len(before))

    segment.channels = "support ops"
    segment.save()
    assert lexical_paths("walrus", channel="ops") == {"main.py", "docs/support.md"}
    segment.delete()  # its files go back to the root's default segment, ungated
    assert lexical_paths("walrus") == {"main.py", "docs/support.md"}
    assert Source.objects.filter(key__contains=":segment:").count() == 0


def test_files_moved_to_a_segment_with_another_model_keep_their_vectors_until_the_job_rebuilds_them(root, second_model):
    directory = Path(root.path)
    (directory / "docs").mkdir()
    (directory / "docs" / "support.md").write_text("# Support\n\nThe walrus escalation path.\n")
    index(root)
    Segment.objects.create(
        root=root, name="support", path_glob="docs/**", channels="support", embedding_model_name=second_model
    )
    # Gated at once; searched with the old model's vectors until the queued job builds the new generation.
    assert lexical_paths("walrus") == set() and lexical_paths("walrus", channel="support") == {"docs/support.md"}
    queued = IndexJob.objects.get(root=root, status=JobStatus.QUEUED)
    IndexJob.objects.filter(pk=queued.pk).update(status=JobStatus.CANCELLED)  # run here instead of by a worker
    index(root)
    assert lexical_paths("walrus", channel="support") == {"docs/support.md"} and lexical_paths("walrus") == set()
    assert Chunk.objects.get(path="docs/support.md").embedding_model.dimensions == 64


def run_job(root: WorkspaceRoot) -> IndexJob:
    """One index job through the Celery task's body, in this process: the path that records a failure on the job."""
    from sources.tasks import root_index_task

    job, created = jobs.root_job_request(root_id=root.pk, force=True, trigger="test")
    assert created
    root_index_task(job.pk)
    job.refresh_from_db()
    return job


@pytest.fixture
def outside(tmp_path_factory):
    """A directory outside RAG_ROOT_BASE_DIRS holding what must never be indexed."""
    directory = tmp_path_factory.mktemp("outside")
    (directory / "a.py").write_text("def osprey_outside():\n    return 'stolen'\n")
    (directory / "b.py").write_text("def osprey_outside_b():\n    return 'stolen'\n")
    return directory


def test_a_root_replaced_by_a_symlink_to_outside_fails_its_job_and_stops_serving(root, tmp_path, outside):
    directory = Path(root.path)
    (directory / "inside.py").write_text("def osprey_inside():\n    return 1\n")
    assert index(root).status == JobStatus.SUCCEEDED
    assert lexical_paths("osprey") == {"inside.py"}
    directory.rename(tmp_path / "moved")
    directory.symlink_to(outside, target_is_directory=True)  # after registration: the admin form never sees it

    job = run_job(root)
    assert job.status == JobStatus.FAILED
    assert "outside the allowed base directories" in job.message and "nothing was read" in job.message
    assert "1 stored chunks were removed from search" in job.message
    assert (job.files_total, job.chunks_embedded) == (0, 0)
    assert lexical_paths("osprey") == set() and lexical_paths("stolen") == set()
    assert not Chunk.objects.exists() and not IndexedFile.objects.exists()


def test_a_missing_root_fails_its_job_but_keeps_its_index(root, tmp_path):
    (Path(root.path) / "inside.py").write_text("def osprey_inside():\n    return 1\n")
    index(root)
    Path(root.path).rename(tmp_path / "unmounted")
    job = run_job(root)
    assert job.status == JobStatus.FAILED and "does not exist" in job.message
    assert lexical_paths("osprey") == {"inside.py"}


def test_files_swapped_for_symlinks_during_a_job_are_skipped_and_nothing_outside_is_read(
    root, tmp_path, outside, monkeypatch
):
    from sources.walk import REPLACED

    directory = Path(root.path)
    (directory / "pkg").mkdir()
    for relative in ["a.py", "pkg/b.py", "c.py"]:
        (directory / relative).write_text("def heron():\n    return 'first'\n")
    index(root)
    for relative in ["a.py", "pkg/b.py", "c.py"]:
        (directory / relative).write_text("def heron():\n    return 'second version'\n")  # changed: this job reads them
    real_walk = folder.walk

    def walk_then_swap(root_fd, rules, left_out=None):
        entries = list(real_walk(root_fd, rules, left_out))  # listed as regular files; swapped before they are read
        (directory / "a.py").unlink()
        (directory / "a.py").symlink_to(outside / "a.py")
        (directory / "pkg").rename(tmp_path / "pkg-moved")
        (directory / "pkg").symlink_to(outside, target_is_directory=True)
        (directory / "c.new").write_text("def heron():\n    return 'saved mid-job'\n")
        (directory / "c.new").replace(directory / "c.py")  # an editor's atomic save
        return entries

    monkeypatch.setattr(folder, "walk", walk_then_swap)
    job = index(root)
    assert job.status == JobStatus.SUCCEEDED
    assert {error["path"]: error["reason"] for error in job.errors} == {
        "a.py": "symlink (not followed)",
        "pkg/b.py": "parent directory pkg is a symlink (not followed)",
        "c.py": REPLACED,
    }
    assert lexical_paths("osprey") == set() and lexical_paths("stolen") == set()
    # The replaced file keeps what was stored (read by the next job); the swapped ones lose theirs.
    assert set(stored(root)) == {"c.py"} and "first" in Chunk.objects.get(path="c.py").content
    monkeypatch.undo()
    assert "saved mid-job" in (index(root), Chunk.objects.get(path="c.py").content)[1]


SECRET_FILES = {
    "secrets.json": '{"pelican_token": "hunter2"}\n',
    "settings.ini": "[settings]\npelican_password = hunter2\n",
    "config/credentials.yaml": "pelican: hunter2\n",
    ".docker/config.json": '{"auths": {"pelican.example": {"auth": "hunter2"}}}\n',
    ".private/notes.md": "# Pelican\n\nThe admin password is hunter2.\n",
    ".env.json": '{"PELICAN_KEY": "hunter2"}\n',
}


def test_secret_files_and_hidden_directories_are_skipped_and_not_searchable(root):
    directory = Path(root.path)
    for relative, text in SECRET_FILES.items():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_text(text)
    (directory / "settings.py").write_text("PELICAN_ENABLED = True  # hunter2 is not here\n")
    job = index(root)
    assert {error["path"]: error["reason"] for error in job.errors} == {
        "secrets.json": "secret-bearing name",
        "settings.ini": "secret-bearing name",
        "config/credentials.yaml": "secret-bearing name",
        ".env.json": "secret-bearing name",
        ".docker": "hidden directory",
        ".private": "hidden directory",
    }
    assert lexical_paths("hunter2") == {"settings.py"}  # Django settings are code: still searchable

    root.index_hidden = True
    root.save()
    job = index(root)
    assert {error["path"]: error["reason"] for error in job.errors} == {
        "secrets.json": "secret-bearing name",
        "settings.ini": "secret-bearing name",
        "config/credentials.yaml": "secret-bearing name",
        ".env.json": "secret-bearing name",
        ".docker/config.json": "secret-bearing name",
    }
    assert lexical_paths("hunter2") == {"settings.py", ".private/notes.md"}


def test_the_deny_list_is_editable_per_root(root):
    (Path(root.path) / "secrets.json").write_text('{"pelican_token": "hunter2"}\n')
    root.deny_patterns = ""
    root.save()
    assert index(root).files_changed == 1 and lexical_paths("hunter2") == {"secrets.json"}
    root.deny_patterns = "*secret*"
    root.save()
    job = index(root)
    assert job.files_deleted == 1 and lexical_paths("hunter2") == set()


def test_a_file_holding_a_private_key_is_skipped_and_the_scan_is_a_root_setting(root, client, django_user_model):
    directory = Path(root.path)
    (directory / "deploy.md").write_text(
        "# Deploy\n\nThe pelican host key:\n\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n"
    )
    job = index(root)
    assert job.errors == [{"path": "deploy.md", "reason": "contains a secret (private key header)"}]
    assert stored(root) == {}

    root.scan_secrets = False
    root.save()
    index(root)
    assert set(stored(root)) == {"deploy.md"}

    # Turned on again in the admin: the next job reads the unchanged file again and drops it.
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    url = f"/admin/sources/workspaceroot/{root.pk}/change/"
    form = client.get(url).context["adminform"].form
    assert "Secret-bearing names never indexed" in str(form["deny_patterns"].help_text)
    assert form["index_hidden"].value() is False
    data = {name: value for name in form.fields if (value := form[name].value()) is not None and value is not False}
    data = {name: ("on" if value is True else value) for name, value in data.items()}  # as a browser posts them
    data.update(
        {
            "scan_secrets": "on",
            "segments-TOTAL_FORMS": "0",
            "segments-INITIAL_FORMS": "0",
            "segments-MIN_NUM_FORMS": "0",
            "segments-MAX_NUM_FORMS": "1000",
        }
    )
    response = client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    job = index(root)
    assert job.errors == [{"path": "deploy.md", "reason": "contains a secret (private key header)"}]
    assert stored(root) == {}
