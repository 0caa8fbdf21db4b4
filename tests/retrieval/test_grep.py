"""Grep answered from the index (retrieval/grep.py): real PostgreSQL and pg_trgm, real trees, ripgrep as the judge.

Roots embed through the fake OpenAI-compatible server (tests/openai_server.py): a copy of Django's ORM is indexed
in seconds, and what grep reads (the stored texts) is what the real pipeline stores.
"""

import json
import shutil
import uuid
from pathlib import Path

import django
import pytest

from access.identity import identity_anonymous
from measure.bench_grep import PATTERNS, RIPGREP, ripgrep
from retrieval.config import FilesLimits
from retrieval.grep import grep_answer
from retrieval.schemas import GrepIn
from sources.models import FileText, IndexedFile, JobStatus, WorkspaceRoot
from tests.conftest import api_client, index_root
from tests.sources.test_web_roots import site, web_root  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

ORM = Path(django.__file__).parent / "db" / "models"


@pytest.fixture
def api(settings, openai_server):
    settings.RAG_LLM_BASE_URL = openai_server.base_url
    settings.RAG_LLM_MAX_RETRIES = 0
    return openai_server


def root_at(directory: Path, name: str, **fields) -> WorkspaceRoot:
    # Embedded by the fake API: a model of its own per test, so no other test's vectors are reused.
    model = f"api:grep-{uuid.uuid4().hex[:8]}@32"
    return WorkspaceRoot.objects.create(name=name, path=str(directory), embedding_model_name=model, **fields)


@pytest.fixture
def orm(tmp_path, settings, api) -> WorkspaceRoot:
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    shutil.copytree(ORM, tmp_path / "orm", ignore=shutil.ignore_patterns("__pycache__"))
    root = root_at(tmp_path / "orm", "orm")
    job = index_root(root, force=False)
    assert job.status == JobStatus.SUCCEEDED, job.message
    return root


def grep(client, **payload) -> dict:
    answer = client.post("/api/v1/grep", data=json.dumps(payload), content_type="application/json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def every_match(root: WorkspaceRoot, pattern: str, *, regex: bool) -> set[tuple[str, int]]:
    # Past the API's cap on max_matches: the comparison needs every line.
    payload = GrepIn.model_construct(
        **GrepIn.model_validate({"pattern": pattern, "regex": regex, "root": root.name}).model_dump()
        | {"max_matches": 10**7}
    )
    answer = grep_answer(identity_anonymous(), payload, limits=FilesLimits.from_settings())
    assert answer.stopped is None and answer.files_skipped == 0
    return {(m.path, m.line) for m in answer.matches}


def test_grep_finds_the_error_message_in_djangos_orm_by_literal_and_by_regex(orm, key_client):
    found = grep(key_client, pattern="Cannot resolve keyword")
    assert {m["path"] for m in found["matches"]} == {"sql/query.py"}
    first = found["matches"][0]
    assert first["citation"] == f"sql/query.py:{first['line']}-{first['line']}"
    files = IndexedFile.objects.filter(source__root=orm).count()
    assert (found["files_searched"], found["files_total"], found["files_skipped"], found["stopped"]) == (
        files,
        files,
        0,
        None,
    )
    regex = grep(key_client, pattern=r"def get_\w*queryset", regex=True, max_matches=200)["matches"]
    assert regex and all("def get_" in m["text"] and "queryset" in m["text"].lower() for m in regex)
    assert "fields/related_descriptors.py" in {m["path"] for m in regex}
    assert grep(key_client, pattern="Cannot resolve keyword", lang="python")["matches"]
    assert grep(key_client, pattern="Cannot resolve keyword", lang="markdown")["matches"] == []
    assert grep(key_client, pattern="Cannot resolve keyword", glob="fields/*")["matches"] == []


@pytest.mark.skipif(not Path(RIPGREP).exists(), reason="ripgrep is not installed (make browser installs it)")
def test_grep_returns_exactly_the_lines_ripgrep_finds_in_the_same_files(orm):
    paths = sorted(FileText.objects.filter(source__root=orm).values_list("path", flat=True))
    assert "sql/query.py" in paths
    for pattern, regex in [*PATTERNS, ("cAnNoT ReSoLvE", False), (r"(?i)IS_NULL\b|isnull=", True)]:
        theirs = ripgrep(Path(orm.path), paths, pattern, regex=regex)
        assert every_match(orm, pattern, regex=regex) == theirs, pattern


def test_a_file_the_caller_may_not_see_never_matches(orm, tmp_path):
    (tmp_path / "alpha").mkdir()
    (tmp_path / "alpha" / "notes.md").write_text("# Notes\n\nalphaonly: Cannot resolve keyword 'x' here.\n")
    alpha = root_at(tmp_path / "alpha", "alpha", bot_id="alpha")
    assert index_root(alpha, force=False).status == JobStatus.SUCCEEDED
    shared = grep(api_client(), pattern="Cannot resolve keyword")
    assert {m["root"] for m in shared["matches"]} == {"orm"} and "alphaonly" not in json.dumps(shared)
    as_alpha = grep(api_client(bot_id="alpha"), pattern="Cannot resolve keyword")
    assert {m["root"] for m in as_alpha["matches"]} == {"alpha", "orm"}


def test_a_pattern_without_trigrams_is_scanned_and_says_how_far(orm, key_client, settings):
    every = grep(key_client, pattern="==", max_matches=200)
    assert every["stopped"] == "max matches" and every["message"] == ""
    settings.RAG_GREP_SCAN_FILES = 3
    bounded = grep(key_client, pattern=r"^\s*$x", regex=True)
    assert (bounded["stopped"], bounded["files_searched"], bounded["truncated"]) == ("scan limit", 3, True)
    assert bounded["message"].startswith(f"searched 3 of {bounded['files_total']} files")


def test_files_indexed_before_texts_were_stored_get_them_at_the_next_job_without_embedding(tmp_path, settings, api):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    (tmp_path / "repo" / "app.py").write_text("def handle_order(order):\n    return order\n")
    (tmp_path / "repo" / "docs" / "guide.md").write_text("# Guide\n\nThe restart procedure.\n")
    root = root_at(tmp_path / "repo", "repo", cooldown_seconds=0)
    assert index_root(root, force=False).status == JobStatus.SUCCEEDED
    FileText.objects.filter(source__root=root).delete()  # as a root indexed before migration 0024 has none
    before = grep(api_client(), pattern="handle_order")
    assert (before["matches"], before["files_skipped"]) == ([], 2)
    embedded = api.count(path="embeddings")

    again = index_root(root, force=False)
    assert (again.status, again.chunks_embedded, again.files_unchanged) == (JobStatus.SUCCEEDED, 0, 2), again.message
    assert api.count(path="embeddings") == embedded
    after = grep(api_client(), pattern="handle_order")
    assert ([m["path"] for m in after["matches"]], after["files_skipped"]) == (["app.py"], 0)

    # A deleted file's text goes with it; a changed one's is replaced.
    (tmp_path / "repo" / "app.py").unlink()
    (tmp_path / "repo" / "docs" / "guide.md").write_text("# Guide\n\nThe handle_order procedure.\n")
    assert index_root(root, force=False).status == JobStatus.SUCCEEDED
    assert list(FileText.objects.filter(source__root=root).values_list("path", flat=True)) == ["docs/guide.md"]
    assert [m["path"] for m in grep(api_client(), pattern="handle_order")["matches"]] == ["docs/guide.md"]


def test_a_web_roots_pages_are_grepped_and_read_from_their_stored_text(web_root, key_client):  # noqa: F811
    assert index_root(web_root, force=False).status == JobStatus.SUCCEEDED
    page = web_root.web_url + "herons.html"
    found = grep(key_client, pattern="grey heron")
    assert [(m["root"], m["path"]) for m in found["matches"]] == [("birds", page)]
    line = found["matches"][0]["line"]
    read = key_client.get("/api/v1/read", {"root": "birds", "path": page, "start": line, "end": line})
    assert read.status_code == 200, read.content
    assert "grey heron" in read.json()["content"] and read.json()["citation"] == found["matches"][0]["citation"]
    whole = key_client.get("/api/v1/read", {"root": "birds", "path": page}).json()
    assert whole["content"].startswith("# Herons")  # the extracted text the chunks cite, not the HTML
    assert key_client.get("/api/v1/read", {"root": "birds", "path": page + "x"}).status_code == 404


def test_a_web_page_opens_in_the_viewer_from_its_stored_text(web_root, client, person):  # noqa: F811
    from django.urls import reverse

    assert index_root(web_root, force=False).status == JobStatus.SUCCEEDED
    page = web_root.web_url + "herons.html"
    shown = client.get(reverse("view-file", args=[web_root.pk, page]))
    assert shown.status_code == 200, shown.content[:500]
    body = shown.content.decode()
    assert "grey heron" in body and "Herons" in body
    assert client.get(reverse("view-file", args=[web_root.pk, page + "x"])).status_code == 404


def test_letter_case_aside_finds_ascii_and_wider_folds_through_the_folded_text(tmp_path, settings, api, key_client):
    """The candidate query reads FileText.folded (ASCII letters lower-cased by PostgreSQL); RE2 decides. Letters
    RE2 folds more widely (the Kelvin sign for k, the long s for s) and non-ASCII letters still find their lines."""
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "notes.txt").write_text(
        "IMPORT Os\nA \u212aelvin reading\nThe long \u017fign\n\u00dcBERMUT und Übermut\nnothing here\n"
    )
    root = root_at(tmp_path / "tree", "folds")
    assert index_root(root, force=False).status == JobStatus.SUCCEEDED
    folded = FileText.objects.get(source__root=root).folded
    assert folded.startswith("import os\na \u212aelvin") and "\u00dcbermut und Übermut" in folded
    lines = {
        pattern: [m["line"] for m in grep(key_client, pattern=pattern, root="folds")["matches"]]
        for pattern in ("import os", "kelvin", "long sign", "übermut", "ÜBERMUT")
    }
    assert lines == {"import os": [1], "kelvin": [2], "long sign": [3], "übermut": [4], "ÜBERMUT": [4]}
    exact = grep(key_client, pattern="IMPORT", root="folds", case_sensitive=True)["matches"]
    assert [m["line"] for m in exact] == [1]
    assert grep(key_client, pattern="import", root="folds", case_sensitive=True)["matches"] == []
