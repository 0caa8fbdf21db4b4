"""Git plumbing of git roots without a database: the diff parser, redaction, URL checks, permalinks."""

import pytest

from sources import git, git_roots

pytestmark = pytest.mark.unit


def test_the_diff_parser_reads_renames_and_deletions():
    raw = b"M\0a.py\0R100\0old/b.py\0new/b.py\0D\0c.md\0A\0d e.txt\0"
    diff = git.diff_parse(raw)
    assert diff.paths == {"a.py", "old/b.py", "new/b.py", "c.md", "d e.txt"}
    assert diff.renames == {"new/b.py": "old/b.py"}


def test_urls_lose_their_user_info_and_the_secret_in_messages():
    text = "fatal: unable to access 'https://bob:hunter22@example.org/x.git': token hunter22 refused"
    assert (
        git.url_redact(text, "bob:hunter22")
        == "fatal: unable to access 'https://***@example.org/x.git': token *** refused"
    )
    assert git.url_problem("https://bob:pw@example.org/x.git") is not None
    assert git.url_problem("git@github.com:org/repo.git") is None
    assert git.url_problem("--upload-pack=touch /tmp/x") is not None


def test_a_permalink_is_built_from_the_template():
    template = "https://git.example.org/org/repo/blob/{commit}/{path}#L{start}-L{end}"
    link = git_roots.permalink(template, commit="abc123", path="docs/a guide.md", start=3, end=9)
    assert link == "https://git.example.org/org/repo/blob/abc123/docs/a%20guide.md#L3-L9"
    assert git_roots.permalink("{nope}", commit="abc", path="x", start=1, end=2) == ""
