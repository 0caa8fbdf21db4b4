"""Git credentials the operator binds, and the one check of a git root's URL and credential (admin and worker).

A root never names a file or a variable: it names a credential the operator
bound in ``RAG_GIT_CREDENTIALS_DIR``, one TOML file per credential,
``NAME.toml``::

    host = "github.com"          # required: the only host (and port) it is ever sent to
    path_prefix = "/acme/"       # optional: the repository path must start with these segments
    token = "ghp_..."            # https: TOKEN or USER:TOKEN, or
    token_file = "acme.token"    #   the same in a file (relative to the directory, or absolute), or
    ssh_key_file = "deploy.key"  # ssh: a private key file

Whoever may add a root may only pick among these names, and a name works
only for the host (and path) it is bound to: the worker's other secrets can
no longer be pointed at a listener of the root adder's choosing. ``http://``
is refused unless ``RAG_GIT_ALLOW_HTTP`` is set, and never carries one.
"""

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from kernel.errors import ApplicationError
from sources import git, git_local
from sources.config import GitConfig

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}
_KEYS = {"host", "path_prefix", "token", "token_file", "ssh_key_file"}
_SECRETS = ("token", "token_file", "ssh_key_file")


@dataclass(frozen=True, slots=True)
class Binding:
    """One bound credential: where it may be sent, and where its secret is (read only when a job sends it)."""

    name: str
    hostname: str  # lower-case
    port: int | None  # None: the scheme's default port
    path_prefix: tuple[str, ...] = ()  # path segments
    token: str = field(default="", repr=False)
    token_file: str = ""
    ssh_key_file: str = ""

    @property
    def kind(self) -> str:
        return "ssh" if self.ssh_key_file else "https"

    @property
    def where(self) -> str:
        host = f"{self.hostname}:{self.port}" if self.port else self.hostname
        return host + ("/" + "/".join(self.path_prefix) if self.path_prefix else "")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a git URL leads: its scheme (scp-like ``user@host:path`` is ssh), host, port and path segments."""

    scheme: str
    hostname: str
    port: int
    segments: tuple[str, ...]

    @property
    def host(self) -> str:
        default = DEFAULT_PORTS.get(self.scheme)
        return self.hostname if self.port == default else f"{self.hostname}:{self.port}"


def url_endpoint(url: str) -> Endpoint | None:
    """The scheme, host, port and path of a remote URL (None for file:// and what does not parse)."""
    if git.is_scp_like(url):
        userhost, _, path = url.partition(":")
        scheme, netloc = "ssh", userhost
    else:
        try:
            parts = urlsplit(url)
        except ValueError:  # "https://[github.com/x": git.url_problem names it
            return None
        if parts.scheme not in DEFAULT_PORTS:
            return None
        scheme, netloc, path = parts.scheme, parts.netloc, parts.path
    try:
        parsed = urlsplit("//" + netloc)
        hostname, port = (parsed.hostname or "").lower(), parsed.port or DEFAULT_PORTS[scheme]
    except ValueError:
        return None
    if not hostname:
        return None
    segments = tuple(s for s in unquote(path).split("/") if s)
    return Endpoint(scheme=scheme, hostname=hostname, port=port, segments=segments)


def credential_binding(*, name: str, directory: str) -> Binding:
    """The credential ``name`` bound in ``directory`` (RAG_GIT_CREDENTIALS_DIR), or an error saying what is wrong."""
    if not NAME.fullmatch(name):
        raise ApplicationError(
            "a credential is named by its name in RAG_GIT_CREDENTIALS_DIR (letters, digits, . _ -), never a path, "
            "a variable or a token"
        )
    if not directory:
        raise ApplicationError(
            f"no credential is bound on this server (RAG_GIT_CREDENTIALS_DIR is not set), so {name!r} is not one"
        )
    path = Path(directory) / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ApplicationError(f"no credential {name!r} is bound (no {name}.toml in RAG_GIT_CREDENTIALS_DIR)") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ApplicationError(f"the binding {name}.toml cannot be read: {exc}") from None
    return _binding(name, data, directory)


def _binding(name: str, data: dict, directory: str) -> Binding:
    where = f"the binding {name}.toml"
    if unknown := set(data) - _KEYS:
        raise ApplicationError(f"{where} has unknown keys: {', '.join(sorted(unknown))}")
    if not all(isinstance(value, str) for value in data.values()):
        raise ApplicationError(f"{where}: every value is a string")
    try:
        parsed = urlsplit("//" + data.get("host", ""))
        hostname, port = (parsed.hostname or "").lower(), parsed.port
    except ValueError:
        hostname, port = "", None
    if not hostname or parsed.path or parsed.username is not None:
        raise ApplicationError(f'{where} needs host = "HOST" or "HOST:PORT" (the only place it is sent)')
    secrets = [key for key in _SECRETS if data.get(key)]
    if len(secrets) != 1:
        raise ApplicationError(f"{where} needs exactly one of token, token_file, ssh_key_file")

    def located(value: str) -> str:
        return value if not value or os.path.isabs(value) else os.path.join(directory, value)

    prefix = tuple(s for s in data.get("path_prefix", "").split("/") if s)
    if any(s in (".", "..") for s in prefix):
        raise ApplicationError(f"{where}: path_prefix may not hold . or ..")
    return Binding(
        name=name,
        hostname=hostname,
        port=port,
        path_prefix=prefix,
        token=data.get("token", "").strip(),
        token_file=located(data.get("token_file", "")),
        ssh_key_file=located(data.get("ssh_key_file", "")),
    )


def credential_names(*, directory: str) -> list[str]:
    """The names bound in ``directory`` (for the admin's help text); none when it is unset or unreadable."""
    if not directory:
        return []
    try:
        return sorted(p.stem for p in Path(directory).glob("*.toml") if NAME.fullmatch(p.stem))
    except OSError:
        return []


def binding_allows(binding: Binding, endpoint: Endpoint) -> bool:
    """Whether ``binding`` may be sent to ``endpoint``: its kind, host, port and path prefix all match."""
    if endpoint.scheme != ("ssh" if binding.kind == "ssh" else "https"):
        return False
    port = binding.port or DEFAULT_PORTS[endpoint.scheme]
    if (binding.hostname, port) != (endpoint.hostname, endpoint.port):
        return False
    prefix, segments = binding.path_prefix, endpoint.segments
    if any(segment in (".", "..") for segment in segments):  # the server may resolve them out of the prefix
        return False
    if not prefix:
        return True
    if len(segments) < len(prefix) or segments[: len(prefix) - 1] != prefix[:-1]:
        return False
    # "/acme/repo" binds "/acme/repo.git" too: a prefix's last segment may name the repository with or without ".git".
    return segments[len(prefix) - 1].removesuffix(".git") == prefix[-1].removesuffix(".git")


def git_remote_problems(*, url: str, credential: str, config: GitConfig) -> dict[str, str]:
    """Why a git root's URL or credential cannot be used, by field (``git_url``, ``git_credential``); {} when they can.

    The one check of both: the admin's form refuses what it finds, and every job
    runs it again before git does anything (the bindings, the base directories and
    the repository on disk may have changed since the root was saved).
    """
    problems: dict[str, str] = {}
    if problem := git.url_problem(url, allow_http=config.allow_http):
        problems["git_url"] = problem
    elif problem := git_local.local_url_problem(url, config.local_bases):
        problems["git_url"] = problem
    if not credential:
        return problems
    endpoint = url_endpoint(url)
    if endpoint is None and "git_url" in problems:
        return problems  # a URL that does not parse leads nowhere: its problem is the one to fix
    if endpoint is None or endpoint.scheme == "http":
        problems["git_credential"] = "a credential is sent only over https:// or ssh, never over http:// or file://"
        return problems
    try:
        binding = credential_binding(name=credential, directory=config.credentials_dir)
    except ApplicationError as exc:
        problems["git_credential"] = exc.message
        return problems
    if not binding_allows(binding, endpoint):
        problems["git_credential"] = (
            f"the credential {credential!r} is bound to {binding.kind} at {binding.where}, not to "
            f"{endpoint.scheme} at {endpoint.host}/{'/'.join(endpoint.segments)}: it is never sent elsewhere"
        )
    return problems


def binding_secret(binding: Binding) -> tuple[str, str]:
    """``(secret, key_file)`` of a binding, read now (the worker's view of its files)."""
    if binding.ssh_key_file:
        if not os.access(binding.ssh_key_file, os.R_OK):
            raise ApplicationError(f"the ssh key of the credential {binding.name!r} cannot be read by the worker")
        return "", binding.ssh_key_file
    if binding.token:
        return binding.token, ""
    try:
        secret = Path(binding.token_file).read_text().strip()
    except OSError as exc:
        raise ApplicationError(
            f"the token file of the credential {binding.name!r} cannot be read by the worker ({exc.strerror})"
        ) from None
    if not secret:
        raise ApplicationError(f"the token file of the credential {binding.name!r} is empty")
    return secret, ""


def legacy_advice(*, url: str, legacy: str) -> str:
    """What a root migrated with a credential by file, variable or URL user info must do now (its jobs fail)."""
    endpoint = url_endpoint(url)
    host = endpoint.host if endpoint else "HOST"
    return (
        f"{legacy} is no longer accepted as a git credential: bind it in RAG_GIT_CREDENTIALS_DIR as NAME.toml "
        f'(host = "{host}" and token_file or ssh_key_file; docs/sources.md) and give NAME as the root\'s credential'
    )
