"""The watcher's cheap filter and routing (sources/watch.py), on plain data: which changes become targeted paths."""

import pathspec
import pytest
from watchfiles import Change

from sources.watch import Pending, WatchedRoot, changes_route

pytestmark = pytest.mark.unit


@pytest.fixture
def roots(tmp_path) -> list[WatchedRoot]:
    (tmp_path / "repo" / "src").mkdir(parents=True)
    (tmp_path / "repo" / "vendor" / "inner").mkdir(parents=True)
    common = {"include": ("*.py", "*.md"), "exclude_dirs": frozenset({"node_modules", ".git"}), "index_hidden": False}
    return [
        WatchedRoot(
            pk=1,
            directory=str(tmp_path / "repo"),
            gitignore=pathspec.GitIgnoreSpec.from_lines(["build/", "*.log"]),
            **common,
        ),
        # A root inside another root's directory owns its own files.
        WatchedRoot(pk=2, directory=str(tmp_path / "repo" / "vendor" / "inner"), **common),
    ]


def routed(roots: list[WatchedRoot], *changes: tuple[Change, str]) -> Pending:
    pending = Pending()
    changes_route(changes, roots, pending)
    return pending


def test_matching_files_become_paths_of_their_root(roots, tmp_path):
    repo = tmp_path / "repo"
    pending = routed(
        roots,
        (Change.modified, f"{repo}/src/app.py"),
        (Change.added, f"{repo}/README.md"),
        (Change.deleted, f"{repo}/vendor/inner/lib.py"),
    )
    assert pending.paths == {1: {"src/app.py", "README.md"}, 2: {"lib.py"}}
    assert not pending.full


def test_what_the_root_would_never_index_is_dropped_before_any_job(roots, tmp_path):
    repo = tmp_path / "repo"
    pending = routed(
        roots,
        (Change.modified, f"{repo}/node_modules/x/index.py"),  # excluded directory
        (Change.modified, f"{repo}/.git/HEAD"),
        (Change.added, f"{repo}/src/.app.py.swp"),  # hidden (an editor's swap file)
        (Change.added, f"{repo}/src/app.py~"),  # not a pattern
        (Change.modified, f"{repo}/build/gen.py"),  # the top .gitignore
        (Change.modified, f"{repo}/server.log"),
        (Change.modified, f"{tmp_path}/elsewhere/app.py"),  # under no root
    )
    assert not pending


def test_a_directory_stands_for_its_files(roots, tmp_path):
    repo = tmp_path / "repo"
    pending = routed(
        roots,
        (Change.added, f"{repo}/src"),  # exists: a directory moved in
        (Change.deleted, f"{repo}/old_package"),  # gone, no suffix: perhaps a directory
        (Change.deleted, f"{repo}/notes.txt"),  # gone, a suffix no pattern takes
    )
    assert pending.paths == {1: {"src", "old_package"}}


def test_a_changed_gitignore_asks_for_the_whole_root(roots, tmp_path):
    pending = routed(roots, (Change.modified, f"{tmp_path}/repo/src/.gitignore"))
    assert pending.full == {1} and not pending.paths
