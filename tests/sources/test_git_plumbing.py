"""Git plumbing of git roots without a database: the diff parser, redaction, URL checks, permalinks."""

import shlex
import shutil
import subprocess

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


def ssh_settings(command: str) -> dict[str, list[str]]:
    """What ssh would use for a connection with ``command`` (``ssh -G`` prints it and connects nowhere)."""
    done = subprocess.run(
        [*shlex.split(command), "-G", "git.example.org"], capture_output=True, text=True, timeout=10, check=True
    )
    settings: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition(" ")
        settings.setdefault(name, []).append(value)
    return settings


@pytest.mark.parametrize("key_file", ["", "/srv/credentials/deploy.key"])
def test_ssh_never_uses_the_worker_account_s_own_ssh_config_or_keys(key_file, tmp_path):
    """OpenSSH finds ~/.ssh through the password database whatever HOME says: without a bound key, the worker's own
    ~/.ssh/config and ~/.ssh/id_* would be used (issue 39 review, item 8)."""
    remote = git.Remote(url="git@git.example.org:org/repo.git", branch="main", key_file=key_file)
    command = git._environment(remote)["GIT_SSH_COMMAND"]
    words = shlex.split(command)
    assert words[:3] == ["ssh", "-F", "/dev/null"]
    for option in ("BatchMode=yes", "IdentitiesOnly=yes", "IdentityFile=none", "IdentityAgent=none"):
        assert option in words
    assert "StrictHostKeyChecking=accept-new" in words and "UserKnownHostsFile=/dev/null" in words
    if shutil.which("ssh") is None:
        return
    if key_file:  # ssh lists only a key file that exists
        key = tmp_path / "deploy.key"
        key.write_text("")
        command = git._ssh_command(str(key))
    seen = ssh_settings(command)
    assert [f for f in seen["identityfile"] if f != "none"] == ([str(tmp_path / "deploy.key")] if key_file else [])
    assert seen["identitiesonly"] == ["yes"] and seen["batchmode"] == ["yes"] and seen["identityagent"] == ["none"]
    assert seen["userknownhostsfile"] == ["/dev/null"]
    # With no remote (git init), ssh is configured the same way.
    assert git._environment(None)["GIT_SSH_COMMAND"] == git._ssh_command("")
