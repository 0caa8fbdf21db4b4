"""/api/v1/read and /api/v1/grep: bots verify citations against the files on disk (real PostgreSQL, MiniLM, files)."""

import json
import os
from pathlib import Path

import pytest

from access.identity import identity_anonymous
from kernel.errors import ApplicationError
from retrieval.config import FilesLimits
from retrieval.files import files_stat, lines_within_chars, read_answer
from sources import walk
from sources.models import JobStatus, WorkspaceRoot
from tests.conftest import api_client, index_root

pytestmark = pytest.mark.django_db

APP = '''"""Orders."""


def handle_order(order):
    """Handle one order."""
    return order


def cancel_order(order):
    return None


HANDLE_ORDER_LIMIT = 3
'''
GUIDE = "# Guide\n\n## Procedure\n\nThe restart procedure: stop, wait, start.\n"
LONG = "".join(f"line {n} of the long file\n" for n in range(1, 1001))


@pytest.fixture
def repo(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    (directory / "docs").mkdir(parents=True)
    (directory / "app.py").write_text(APP)
    (directory / "docs" / "guide.md").write_text(GUIDE)
    (directory / "long.txt").write_text(LONG)
    (directory / "aaaa.txt").write_text("a" * 20_000 + "!\n" + "aaaa\n")
    (directory / "data.dat").write_text("handle_order,not indexed\n")  # *.dat is not in the include globs
    (tmp_path / "outside.txt").write_text("TOPSECRET outside the root: handle_order\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(directory))
    assert index_root(root).status == JobStatus.SUCCEEDED
    return root


@pytest.fixture
def alpha(tmp_path, settings, repo):
    directory = tmp_path / "alpha"
    directory.mkdir()
    (directory / "plan.md").write_text("# Plan\n\nThe alphaonly handle_order plan.\n")
    root = WorkspaceRoot.objects.create(name="alpha", path=str(directory), bot_id="alpha")
    assert index_root(root).status == JobStatus.SUCCEEDED
    return root


def read(client, **params):
    return client.get("/api/v1/read", params)


def grep(client, **payload):
    return client.post("/api/v1/grep", data=json.dumps(payload), content_type="application/json")


def lines_of(root: WorkspaceRoot, path: str, start: int, end: int) -> str:
    return "\n".join(Path(root.path, path).read_text().split("\n")[start - 1 : end])


def test_read_returns_the_exact_lines_of_an_indexed_file(key_client, repo):
    answer = read(key_client, root="repo", path="app.py", start=4, end=6)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["content"] == lines_of(repo, "app.py", 4, 6)
    assert body["content"].startswith("def handle_order(order):")
    assert (body["start_line"], body["end_line"], body["total_lines"]) == (4, 6, APP.count("\n"))
    assert (body["root"], body["path"], body["citation"], body["language"]) == (
        "repo",
        "app.py",
        "app.py:4-6",
        "python",
    )
    assert body["truncated"] is False and body["stale"] is False
    assert len(body["indexed_hash"]) == 64 and body["indexed_at"]


def test_read_finds_the_root_by_id_and_reads_the_whole_small_file_by_default(key_client, repo):
    body = read(key_client, root=str(repo.pk), path="docs/guide.md").json()
    assert body["content"] == GUIDE.rstrip("\n")
    assert (body["start_line"], body["end_line"], body["truncated"], body["language"]) == (1, 5, False, "markdown")


def test_read_clamps_to_the_cap_and_to_the_file_and_says_when_it_cut(key_client, repo, settings):
    settings.RAG_READ_MAX_LINES = 10
    capped = read(key_client, root="repo", path="long.txt", start=5, end=100).json()
    assert (capped["start_line"], capped["end_line"], capped["truncated"]) == (5, 14, True)
    assert capped["content"] == lines_of(repo, "long.txt", 5, 14)
    by_default = read(key_client, root="repo", path="long.txt", start=20).json()
    assert (by_default["end_line"], by_default["truncated"]) == (29, False)
    at_the_end = read(key_client, root="repo", path="long.txt", start=995, end=1000).json()
    assert (at_the_end["end_line"], at_the_end["total_lines"], at_the_end["truncated"]) == (1000, 1000, False)
    past_the_end = read(key_client, root="repo", path="long.txt", start=995, end=5000).json()
    assert (past_the_end["end_line"], past_the_end["truncated"]) == (1000, True)
    beyond = read(key_client, root="repo", path="long.txt", start=1001)
    assert beyond.status_code == 422 and "past the end" in beyond.json()["error"]
    backwards = read(key_client, root="repo", path="long.txt", start=10, end=9)
    assert backwards.status_code == 422


def test_read_cuts_at_whole_lines_below_the_character_cap(key_client, repo, settings):
    settings.RAG_READ_MAX_CHARS = 95  # lines 1-4 of long.txt: 4 x 23 characters and 3 newlines
    fits = read(key_client, root="repo", path="long.txt", start=1, end=4).json()
    assert (fits["end_line"], fits["truncated"], len(fits["content"])) == (4, False, 95)
    settings.RAG_READ_MAX_CHARS = 100
    cut = read(key_client, root="repo", path="long.txt", start=1, end=10).json()
    assert (cut["start_line"], cut["end_line"], cut["truncated"], cut["citation"]) == (1, 4, True, "long.txt:1-4")
    assert cut["content"] == lines_of(repo, "long.txt", 1, 4)
    # One minified line longer than the cap: that line alone, cut at the cap.
    minified = read(key_client, root="repo", path="aaaa.txt").json()
    assert (minified["end_line"], minified["truncated"], minified["citation"]) == (1, True, "aaaa.txt:1-1")
    assert minified["content"] == "a" * 100


@pytest.mark.parametrize(
    ("lines", "cap", "expected"),
    [
        (["ab", "cd"], 5, (["ab", "cd"], False)),
        (["ab", "cd"], 4, (["ab"], True)),
        (["abcdef", "g"], 3, (["abc"], True)),
        (["", ""], 1, (["", ""], False)),
        (["abc"], 3, (["abc"], False)),
    ],
)
def test_lines_within_chars_keeps_whole_lines_and_at_least_one(lines, cap, expected):
    assert lines_within_chars(lines, cap) == expected


def test_read_says_stale_when_the_file_changed_since_it_was_indexed(key_client, repo):
    guide = Path(repo.path, "docs", "guide.md")
    guide.write_text(GUIDE + "\nA new line.\n")
    edited = read(key_client, root="repo", path="docs/guide.md").json()
    assert edited["stale"] is True and edited["content"].endswith("A new line.")

    app = Path(repo.path, "app.py")
    info = app.stat()
    os.utime(app, ns=(info.st_atime_ns, info.st_mtime_ns + 5_000_000_000))  # same size and text, newer mtime
    touched = read(key_client, root="repo", path="app.py").json()
    assert touched["stale"] is True and touched["content"] == APP.rstrip("\n")
    assert read(key_client, root="repo", path="long.txt").json()["stale"] is False


@pytest.mark.parametrize(
    "path", ["../x", "/etc/passwd", "a/../../b", "docs/./guide.md", "docs\\guide.md", "", "x" * 1025]
)
def test_unsafe_paths_are_refused_before_the_database_or_the_disk(path, repo, monkeypatch, django_assert_num_queries):
    def touched(*args, **kwargs):
        raise AssertionError("the disk was touched")

    monkeypatch.setattr(walk, "root_open", touched)
    monkeypatch.setattr(walk, "open_beneath", touched)
    with django_assert_num_queries(0), pytest.raises(ApplicationError) as refused:
        read_answer(identity_anonymous(), root="repo", path=path, limits=FilesLimits.from_settings())
    assert type(refused.value) is ApplicationError and "refused: the path" in refused.value.message


def test_unsafe_paths_get_a_400_over_http(key_client, repo):
    for path in ("../x", "/etc/passwd", "a/../../b"):
        answer = read(key_client, root="repo", path=path)
        assert answer.status_code == 400 and "refused" in answer.json()["error"], path
    with_nul = key_client.get("/api/v1/read?root=repo&path=app.py%00.md")
    assert with_nul.status_code == 400


def test_a_symlink_swapped_in_after_indexing_is_never_followed(key_client, repo, tmp_path):
    guide = Path(repo.path, "docs", "guide.md")
    guide.unlink()
    guide.symlink_to(tmp_path / "outside.txt")
    answer = read(key_client, root="repo", path="docs/guide.md")
    assert answer.status_code == 422 and "symlink" in answer.json()["error"]
    assert "TOPSECRET" not in answer.content.decode()

    # A directory swapped for a link: not followed either.
    app = Path(repo.path, "app.py")
    app.unlink()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "app.py").write_text("TOPSECRET handle_order\n")
    docs = Path(repo.path, "docs")
    guide.unlink()
    docs.rmdir()
    docs.symlink_to(outside)
    (outside / "guide.md").write_text("TOPSECRET procedure\n")
    assert read(key_client, root="repo", path="docs/guide.md").status_code == 422

    # Grep answers from the text indexed (retrieval/grep.py), never from what a link leads to now.
    assert grep(key_client, pattern="TOPSECRET").json()["matches"] == []
    found = grep(key_client, pattern="handle_order").json()
    assert {m["path"] for m in found["matches"]} == {"app.py"} and "TOPSECRET" not in json.dumps(found)


def test_a_file_the_caller_may_not_see_answers_404_like_a_missing_one(key_client, alpha):
    hidden = read(key_client, root="alpha", path="plan.md")
    missing = read(key_client, root="no-such-root", path="plan.md")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["error"] == "root 'alpha' not found"
    assert read(key_client, root=str(alpha.pk), path="plan.md").status_code == 404
    as_alpha = read(api_client(bot_id="alpha"), root="alpha", path="plan.md")
    assert as_alpha.status_code == 200 and "alphaonly" in as_alpha.json()["content"]


def test_a_file_on_disk_that_is_not_indexed_answers_404(key_client, repo):
    assert Path(repo.path, "data.dat").exists()
    answer = read(key_client, root="repo", path="data.dat")
    assert answer.status_code == 404 and "only indexed files" in answer.json()["error"]
    assert read(key_client, root="repo", path="nothing/here.py").status_code == 404


def test_a_file_deleted_since_it_was_indexed_answers_404(key_client, repo):
    Path(repo.path, "app.py").unlink()
    answer = read(key_client, root="repo", path="app.py")
    assert answer.status_code == 404 and "no longer exists" in answer.json()["error"]


def test_grep_finds_literal_text_with_line_numbers_and_citations(key_client, repo):
    body = grep(key_client, pattern="handle_order").json()
    app_lines = APP.split("\n")
    expected = [n for n, line in enumerate(app_lines, start=1) if "handle_order" in line.lower()]
    assert [(m["root"], m["path"], m["line"]) for m in body["matches"]] == [("repo", "app.py", n) for n in expected]
    assert [m["text"] for m in body["matches"]] == [app_lines[n - 1] for n in expected]
    assert body["matches"][0]["citation"] == f"app.py:{expected[0]}-{expected[0]}"
    assert "data.dat" not in {m["path"] for m in body["matches"]}  # not indexed, never grepped
    assert (body["files_searched"], body["files_skipped"], body["truncated"], body["stopped"]) == (4, 0, False, None)


def test_grep_is_case_insensitive_unless_asked(key_client, repo):
    assert {m["line"] for m in grep(key_client, pattern="HANDLE_ORDER").json()["matches"]} == {4, 13}
    assert [m["line"] for m in grep(key_client, pattern="HANDLE_ORDER", case_sensitive=True).json()["matches"]] == [13]
    # Literal by default: regex characters are text.
    assert grep(key_client, pattern="handle_order(").json()["matches"][0]["line"] == 4
    assert grep(key_client, pattern="def .*_order").json()["matches"] == []


def test_grep_runs_re2_regexes(key_client, repo):
    found = grep(key_client, pattern=r"^def \w+_order\(", regex=True).json()["matches"]
    assert [(m["path"], m["line"]) for m in found] == [("app.py", 4), ("app.py", 9)]
    anchored = grep(key_client, pattern=r"\Aline 7 ", regex=True, glob="*.txt").json()["matches"]
    assert [m["line"] for m in anchored] == [7]
    ends = grep(key_client, pattern=r"(?-m)wait, start\.$", regex=True).json()["matches"]
    assert [(m["path"], m["line"]) for m in ends] == [("docs/guide.md", 5)]


def test_a_pathological_regex_answers_in_linear_time(key_client, repo):
    body = grep(key_client, pattern="(a+)+$", regex=True, glob="aaaa.txt").json()
    assert [(m["line"], m["text"]) for m in body["matches"]] == [(2, "aaaa")]
    assert body["stopped"] is None


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!a)b", "(unclosed"])
def test_a_regex_re2_cannot_run_is_a_422_with_its_reason(key_client, repo, pattern):
    answer = grep(key_client, pattern=pattern, regex=True)
    assert answer.status_code == 422 and "invalid regex" in answer.json()["error"], answer.content
    assert answer.json()["data"]["field"] == "pattern"


def test_grep_narrows_by_glob_and_root(key_client, repo):
    assert {m["path"] for m in grep(key_client, pattern="procedure", glob="docs/**").json()["matches"]} == {
        "docs/guide.md"
    }
    assert grep(key_client, pattern="procedure", glob="*.py").json()["matches"] == []
    assert grep(key_client, pattern="line 1 ", glob="*.txt", root="repo").json()["matches"][0]["path"] == "long.txt"
    assert grep(key_client, pattern="x", root="no-such-root").status_code == 404
    for glob in ("/etc/*", "../*", "docs\\*"):
        assert grep(key_client, pattern="x", glob=glob).status_code == 422, glob


def test_grep_stops_at_max_matches_and_says_so(key_client, repo):
    capped = grep(key_client, pattern="of the long file", max_matches=3).json()
    assert [m["line"] for m in capped["matches"]] == [1, 2, 3]
    assert (capped["truncated"], capped["stopped"]) == (True, "max matches")
    exact = grep(key_client, pattern="handle_order", max_matches=2).json()  # exactly two such lines
    assert (len(exact["matches"]), exact["truncated"], exact["stopped"]) == (2, False, None)
    assert grep(key_client, pattern="x", max_matches=100_000).status_code == 422


def test_a_pattern_the_index_cannot_narrow_is_scanned_up_to_the_stated_bound(key_client, repo, settings):
    settings.RAG_GREP_SCAN_FILES = 2  # of aaaa.txt, app.py, docs/guide.md, long.txt
    body = grep(key_client, pattern="(").json()  # no three letters or digits in a row: no trigram
    assert {m["path"] for m in body["matches"]} == {"app.py"}
    assert (body["files_searched"], body["files_total"], body["stopped"]) == (2, 4, "scan limit")
    assert body["truncated"] and body["message"].startswith("searched 2 of 4 files")
    settings.RAG_GREP_SCAN_FILES = 20_000
    whole = grep(key_client, pattern="(").json()
    assert (whole["files_searched"], whole["stopped"], whole["message"]) == (4, None, "")


def test_grep_never_shows_lines_of_files_outside_the_callers_scope(key_client, alpha):
    shared = grep(key_client, pattern="handle_order").json()
    assert {m["root"] for m in shared["matches"]} == {"repo"}
    assert "alphaonly" not in json.dumps(shared)
    assert grep(key_client, pattern="x", root="alpha").status_code == 404
    as_alpha = grep(api_client(bot_id="alpha"), pattern="alphaonly").json()["matches"]
    assert [(m["root"], m["path"], m["line"]) for m in as_alpha] == [("alpha", "plan.md", 3)]


def test_files_stat_gives_size_and_mtime_reached_safely(repo, tmp_path):
    Path(repo.path, "docs", "link.md").symlink_to(tmp_path / "outside.txt")
    app = Path(repo.path, "app.py").stat()
    stats = files_stat(root_id=repo.pk, paths=["app.py", "gone.py", "docs/link.md", "../outside.txt", "docs"])
    assert stats == {
        "app.py": (app.st_size, app.st_mtime_ns),
        "gone.py": None,
        "docs/link.md": None,
        "../outside.txt": None,
        "docs": None,
    }
    assert files_stat(root_id=repo.pk + 1000, paths=["app.py"]) == {"app.py": None}


def test_asking_for_more_scope_than_the_key_allows_is_refused(key_client, alpha):
    assert read(key_client, root="alpha", path="plan.md", bot_id="alpha").status_code == 403
    assert grep(key_client, pattern="alphaonly", bot_id="alpha").status_code == 403
    narrowed = read(
        api_client(bot_id="alpha", channels="ops"), root="alpha", path="plan.md", bot_id="alpha", channels=["ops"]
    )
    assert narrowed.status_code == 200, narrowed.content


def test_grep_stopping_at_max_matches_counts_the_files_up_to_where_it_stopped(key_client, repo):
    """Files in path order: aaaa.txt, app.py, docs/guide.md, long.txt. One match past the cap stops the answer in
    the file holding it; files_searched counts the files up to it, scanned or from the index, with or without a
    glob (two code paths)."""
    order = ["aaaa.txt", "app.py", "docs/guide.md", "long.txt"]
    for pattern in ("or", "order"):  # no trigram (scanned), and a trigram (the index's candidates)
        every = grep(key_client, pattern=pattern, max_matches=200).json()
        assert every["stopped"] is None and len(every["matches"]) >= 3
        for cap in (1, 2):
            stopper = every["matches"][cap]["path"]  # the match past the cap: the answer stops in its file
            for glob in (None, "*"):
                body = grep(key_client, pattern=pattern, max_matches=cap, **({"glob": glob} if glob else {})).json()
                assert body["matches"] == every["matches"][:cap]
                assert (body["stopped"], body["files_searched"], body["files_total"]) == (
                    "max matches",
                    order.index(stopper) + 1,
                    4,
                )
