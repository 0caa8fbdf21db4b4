"""Git plumbing for git roots: the ``git`` CLI run with a timeout, no prompt, no hooks and no user config.

Credentials reach git only through its environment (``GIT_SSH_COMMAND`` with
a key file, and never the worker account's ssh keys or config; an
``http.<origin>.extraHeader`` in ``GIT_CONFIG_*``), never its
command line, where ``ps`` would show them. Every message that leaves this module is
redacted: URL user info and the secret itself become ``***``.

The clone is blobless (``--filter=blob:none``), not shallow: it holds every
commit and tree, so the diff from the last indexed commit to the new tip,
and whether that commit is still an ancestor of it (a force-push is not),
are answered locally; blobs are fetched only for what is checked out. A
shallow clone would have to deepen until it met the old commit, and could
not tell "rewritten" from "not fetched deep enough".
"""

import base64
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from kernel.errors import ApplicationError

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# How a file in the tree names a submodule (a commit of another repository, never checked out here).
GITLINK_MODE = "160000"
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
SUBMODULE_REASON = "a git submodule: its commit is in another repository, not indexed"
LFS_REASON = "a Git LFS pointer: the file's content is not in the repository"

_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
_SSH_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:")


class GitError(ApplicationError):
    """A git command failed or timed out; the message is redacted."""


@dataclass(frozen=True, slots=True)
class Remote:
    """A git root's remote and how to authenticate to it; ``secret`` never leaves this process."""

    url: str
    branch: str
    key_file: str = ""  # ssh private key
    secret: str = field(default="", repr=False)  # https token, "TOKEN" or "USER:TOKEN"


@dataclass(frozen=True, slots=True)
class Repo:
    """A root's clone (``git_dir``, bare) and the checkout the walker reads (``work_tree``)."""

    git_dir: str
    work_tree: str
    timeout: int


@dataclass(slots=True)
class Diff:
    """What changed between two commits, root-relative."""

    paths: set[str] = field(default_factory=set)  # every path touched (both sides of a rename)
    renames: dict[str, str] = field(default_factory=dict)  # new path -> old path, content unchanged or similar


def url_redact(text: str, secret: str = "") -> str:
    """``text`` with the user info of any URL and ``secret`` replaced by ``***``."""
    text = _USERINFO.sub(lambda m: m.group("scheme") + "***@", text)
    if secret:
        text = text.replace(secret, "***")
        if ":" in secret:
            for part in secret.split(":"):
                if len(part) >= 6:
                    text = text.replace(part, "***")
    return text


def url_problem(url: str, *, allow_http: bool = False) -> str | None:
    """Why ``url`` cannot be a git root's remote (None when it can). ``allow_http``: RAG_GIT_ALLOW_HTTP."""
    if not url:
        return "a git root needs a URL"
    if url.startswith("-") or any(c in url for c in "\x00\n\r "):
        return "the URL has a leading dash or a space or control character"
    if _SSH_SCP.match(url):
        return None
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("https", "http", "ssh", "file"):
        return "the URL must start with https://, ssh://, file:// (or be user@host:path)"
    if scheme == "http" and not allow_http:
        return (
            "an http:// remote sends everything in the clear: use https:// "
            "(RAG_GIT_ALLOW_HTTP allows one without a credential)"
        )
    if scheme != "file":
        try:
            # What git, the credential check and the header's scope all read: a URL whose host does not parse
            # ("https://[github.com/x", a full-width slash) is refused here, never a crash further on.
            parts = urlsplit(url)
            _ = parts.hostname, parts.port
        except ValueError:
            return (
                "the URL's host does not parse (an unclosed or misplaced [ ], a bad port, or a character that is "
                "not allowed in a host name)"
            )
        if not parts.hostname:
            return "the URL names no host"
    userinfo = rest.split("/", 1)[0].rpartition("@")[0]
    # A user name in an https URL is where tokens get pasted (https://ghp_...@github.com): the URL is stored and shown.
    if userinfo and (scheme in ("https", "http") or ":" in userinfo):
        return "the URL holds a user name, password or token: bind it as a credential (RAG_GIT_CREDENTIALS_DIR) instead"
    return None


def is_scp_like(url: str) -> bool:
    """``user@host:path``: git's ssh shorthand."""
    return bool(_SSH_SCP.match(url))


def is_ssh(url: str) -> bool:
    return url.startswith("ssh://") or bool(_SSH_SCP.match(url))


def remote_scheme(url: str) -> str:
    """The protocol git speaks to ``url`` (scp-like ``user@host:path`` is ssh)."""
    return "ssh" if _SSH_SCP.match(url) else url.partition("://")[0]


def _environment(remote: Remote | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LANG": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    # No hooks (a repository's own config could name some) and no fsmonitor process: the clone is data, never code.
    config = [("core.hooksPath", "/dev/null"), ("core.fsmonitor", "false"), ("protocol.ext.allow", "never")]
    # git speaks only the remote's own protocol (no http:// fallback, no file:// reached through a redirect or
    # alternates); with no remote, none at all.
    config.append(("protocol.allow", "never"))
    if remote is not None:
        config.append((f"protocol.{remote_scheme(remote.url)}.allow", "always"))
    if remote is not None and remote.secret and not is_ssh(remote.url):
        user, sep, token = remote.secret.partition(":")
        basic = remote.secret if sep else f"x-access-token:{remote.secret}"
        # Scoped to the remote's own origin (git matches it against each request's URL), and no redirect is
        # followed: the header goes only where the bound credential allows (sources/git_credentials.py).
        parts = urlsplit(remote.url)
        header = "Authorization: Basic " + base64.b64encode(basic.encode()).decode()
        config.append((f"http.{parts.scheme}://{parts.netloc}/.extraHeader", header))
        config.append(("http.followRedirects", "false"))
    env["GIT_SSH_COMMAND"] = _ssh_command(remote.key_file if remote is not None else "")
    env["GIT_CONFIG_COUNT"] = str(len(config))
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _ssh_command(key_file: str) -> str:
    """The ssh git runs, with or without a bound key: never the worker account's own ssh setup.

    OpenSSH finds ``~/.ssh`` through the password database, not HOME: without
    ``-F /dev/null`` it reads the account's ``~/.ssh/config`` (Host aliases,
    ProxyCommand, its IdentityFile lines), and without ``IdentityFile=none`` it
    offers ``~/.ssh/id_*``, so a root with no credential authenticated as the
    worker to any ssh host, bypassing the credential bindings. ``-i`` adds the
    bound key (``none`` is skipped by ssh). Host keys: accepted on first sight
    and remembered nowhere (``/dev/null``), as before, for every ssh remote.
    """
    command = (
        "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityFile=none -o IdentityAgent=none "
        "-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile=/dev/null"
    )
    return f"{command} -i '{key_file}'" if key_file else command


def git(repo: Repo, *args: str, remote: Remote | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``git --git-dir=... --work-tree=... ARGS``; a failure raises GitError with git's (redacted) words."""
    command = ["git", f"--git-dir={repo.git_dir}", f"--work-tree={repo.work_tree}", *args]
    secret = remote.secret if remote else ""
    try:
        done = subprocess.run(
            command, env=_environment(remote), capture_output=True, timeout=repo.timeout, check=False, stdin=None
        )
    except subprocess.TimeoutExpired:
        raise GitError(
            f"git {args[0]} took longer than {repo.timeout} s (RAG_GIT_TIMEOUT_SECONDS) and was stopped"
        ) from None
    except FileNotFoundError:
        raise GitError("the git command is not installed on this worker") from None
    if check and done.returncode != 0:
        words = done.stderr.decode("utf-8", "replace").strip().splitlines()
        said = "; ".join(line for line in words if line and not line.startswith("hint:"))[-800:]
        raise GitError(url_redact(f"git {args[0]} failed: {said or f'exit status {done.returncode}'}", secret))
    return done


def repo_fetch(repo: Repo, remote: Remote) -> str:
    """Create the clone if needed, fetch the branch, return its tip's commit id."""
    if not os.path.isdir(repo.git_dir):
        Path(repo.git_dir).parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["git", "init", "--quiet", "--bare", repo.git_dir], env=_environment(None), capture_output=True, timeout=30
        )
        if done.returncode:
            raise GitError(f"could not create the clone: {done.stderr.decode('utf-8', 'replace').strip()}")
    os.makedirs(repo.work_tree, exist_ok=True)
    # A named remote: a blobless clone fetches the blobs a checkout or diff needs later from it. Set every time
    # (the URL may have been edited); it holds no secret, those come from the environment.
    if git(repo, "remote", "set-url", "origin", remote.url, check=False).returncode:
        git(repo, "remote", "add", "origin", remote.url)
    ref = f"refs/remotes/origin/{remote.branch}"
    git(
        repo,
        "fetch",
        "--quiet",
        "--no-tags",
        "--filter=blob:none",
        "origin",
        f"+refs/heads/{remote.branch}:{ref}",
        remote=remote,
    )
    return commit_of(repo, ref)


# A URL's secret part: all of an http(s) URL's user info (a token often stands as the user name), an ssh URL's
# password (its user name is no secret: git@).
_URL_SECRET = re.compile(r"^(?:(?P<http>https?://)[^/@]*@|(?P<ssh>[a-zA-Z][a-zA-Z0-9+.-]*://[^/@:]*):[^/@]*@)")


def url_without_secret(url: str) -> str:
    """``url`` with its token or password removed (the user name of an ssh URL stays)."""
    return _URL_SECRET.sub(lambda m: m["http"] or f"{m['ssh']}@", url, count=1)


def clone_scrub(git_dir: str) -> bool:
    """Remove tokens and passwords from the remote URLs a clone's config keeps (True when one was removed).

    Before issue 39 a root's URL could carry its token (https://TOKEN@host/...), and the clone's
    ``remote.origin.url`` kept it on disk; migration 0020 cleaned only the database, and a root whose credential
    no longer qualifies fails before its fetch would set the URL again. Rewritten here by every job of the root
    and, for every clone, when a worker starts.
    """
    config = os.path.join(git_dir, "config")
    if not os.path.isfile(config):
        return False
    try:
        return _config_scrub(config)
    except (subprocess.SubprocessError, OSError) as exc:
        raise GitError(f"the clone's config could not be cleaned of an old token ({type(exc).__name__})") from None


def _config_scrub(config: str) -> bool:
    env = _environment(None)
    done = subprocess.run(
        ["git", "config", "--file", config, "--null", "--get-regexp", r"^remote\..*\.(url|pushurl)$"],
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    entries: dict[str, list[str]] = {}
    for entry in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
        key, _, value = entry.partition("\n")
        if key:
            entries.setdefault(key, []).append(value)
    scrubbed = False
    for key, urls in entries.items():
        clean = [url_without_secret(url) for url in urls]
        if clean == urls:
            continue
        scrubbed = True
        command = ["git", "config", "--file", config]
        subprocess.run([*command, "--unset-all", key], env=env, capture_output=True, timeout=30, check=True)
        for url in clean:
            subprocess.run([*command, "--add", key, url], env=env, capture_output=True, timeout=30, check=True)
    return scrubbed


def commit_of(repo: Repo, ref: str) -> str:
    return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").stdout.decode().strip()


def is_ancestor(repo: Repo, old: str, new: str) -> bool:
    """Whether ``old`` is still in ``new``'s history (False after a force-push, or when it is gone)."""
    if git(repo, "cat-file", "-e", f"{old}^{{commit}}", check=False).returncode != 0:
        return False
    return git(repo, "merge-base", "--is-ancestor", old, new, check=False).returncode == 0


def diff_read(repo: Repo, remote: Remote, old: str, new: str) -> Diff:
    """The paths changed from ``old`` to ``new`` (``git diff --name-status -M -z``; blobs fetched as rename
    detection needs them)."""
    raw = git(repo, "diff", "--name-status", "-M", "-z", old, new, "--", remote=remote).stdout
    return diff_parse(raw)


def diff_parse(raw: bytes) -> Diff:
    """Parse ``git diff --name-status -M -z``: ``STATUS\\0PATH\\0`` or, for R and C, ``STATUS\\0OLD\\0NEW\\0``."""
    fields = raw.split(b"\0")
    diff = Diff()
    index = 0
    while index < len(fields) and fields[index]:
        status = fields[index].decode()
        if status[0] in "RC":
            old, new = os.fsdecode(fields[index + 1]), os.fsdecode(fields[index + 2])
            index += 3
            diff.paths.add(new)
            if status[0] == "R":
                diff.paths.add(old)
                diff.renames[new] = old
        else:
            diff.paths.add(os.fsdecode(fields[index + 1]))
            index += 2
    return diff


def gitlinks(repo: Repo, commit: str) -> list[str]:
    """The submodules (gitlinks) of ``commit``'s tree, root-relative."""
    out = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit).stdout
    found = []
    for entry in out.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        if meta.startswith(GITLINK_MODE.encode()):
            found.append(os.fsdecode(path))
    return found


def checkout(repo: Repo, remote: Remote, commit: str) -> None:
    """Make the work tree ``commit``'s files (what is tracked changes; nothing else is there)."""
    git(repo, "checkout", "--quiet", "--detach", "--force", commit, remote=remote)
    # Files of a former commit that git no longer tracks (e.g. after a branch switch, or a half-done checkout).
    git(repo, "clean", "-q", "-d", "-f", "-x")
