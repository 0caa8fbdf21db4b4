"""What a file:// remote leads git to read (issue 39 item 3), without a database: http-alternates, a symlink inside
the repository, and the plain repository that passes."""

from pathlib import Path

import pytest

from sources.git_local import local_url_problem
from tests.gitrepo import Origin

pytestmark = pytest.mark.unit


@pytest.fixture
def base(tmp_path) -> Path:
    repo = Origin(tmp_path / "base")
    repo.commit("first", {"a.md": "# A\n"})
    repo.push()
    return tmp_path / "base"


def test_a_plain_bare_repository_under_the_base_directories_passes(base):
    assert local_url_problem(f"file://{base / 'origin.git'}", (str(base),)) is None


def test_http_alternates_are_refused(base):
    (base / "origin.git" / "objects" / "info" / "http-alternates").write_text("http://127.0.0.1:9/objects\n")
    problem = local_url_problem(f"file://{base / 'origin.git'}", (str(base),))
    assert problem and "http-alternates" in problem


def test_a_symlink_inside_the_repository_that_leads_outside_is_refused(base, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (base / "origin.git" / "objects" / "pack").rmdir()
    (base / "origin.git" / "objects" / "pack").symlink_to(tmp_path / "elsewhere")
    problem = local_url_problem(f"file://{base / 'origin.git'}", (str(base),))
    assert problem and str(tmp_path / "elsewhere") in problem


def test_a_relative_file_url_is_refused(base):
    assert "absolute path" in (local_url_problem("file://base/origin.git", (str(base),)) or "")
