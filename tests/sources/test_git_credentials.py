"""Git credentials the operator binds (issue 39 item 2, 9c): a root names one, it goes only to the host it is bound
to, never over http://; a file, a variable or a URL's user info is no longer a credential."""

import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sources import git, git_roots, jobs, pipeline
from sources.config import GitConfig, git_config
from sources.git_credentials import binding_allows, credential_binding, git_remote_problems, url_endpoint
from sources.models import IndexJob, JobStatus, WorkspaceRoot

TOKEN = "tok-bound-very-secret"


def bind(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.toml").write_text(text)


@pytest.fixture
def bound(tmp_path) -> GitConfig:
    """Three credentials: a token for github.com/acme, a token file for a Gitea on port 3000, an ssh key."""
    directory = tmp_path / "credentials"
    bind(directory, "acme", f'host = "github.com"\npath_prefix = "/acme/"\ntoken = "{TOKEN}"\n')
    bind(directory, "gitea", 'host = "git.example.org:3000"\ntoken_file = "gitea.token"\n')
    (directory / "gitea.token").write_text("bob:" + TOKEN + "\n")
    bind(directory, "deploy", 'host = "git.example.org"\nssh_key_file = "deploy.key"\n')
    (directory / "deploy.key").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    return GitConfig(directory=str(tmp_path / "var"), timeout_seconds=30, credentials_dir=str(directory))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("name", "url", "allowed"),
    [
        ("acme", "https://github.com/acme/repo.git", True),
        ("acme", "https://GitHub.com:443/acme/sub/repo.git", True),
        ("acme", "https://github.com/other/repo.git", False),
        ("acme", "https://github.com/acme-evil/repo.git", False),
        ("acme", "https://github.com/acme/%2e%2e/other/repo.git", False),
        ("acme", "https://github.com:8443/acme/repo.git", False),
        ("acme", "https://github.com.evil.org/acme/repo.git", False),
        ("acme", "ssh://git@github.com/acme/repo.git", False),
        ("gitea", "https://git.example.org:3000/x/y.git", True),
        ("gitea", "https://git.example.org/x/y.git", False),
        ("deploy", "git@git.example.org:org/repo.git", True),
        ("deploy", "ssh://git@git.example.org:2222/org/repo.git", False),
        ("deploy", "https://git.example.org/org/repo.git", False),
    ],
)
def test_a_binding_allows_only_its_host_port_path_and_kind(bound, name, url, allowed):
    binding = credential_binding(name=name, directory=bound.credentials_dir)
    endpoint = url_endpoint(url)
    assert endpoint is not None
    assert binding_allows(binding, endpoint) is allowed


@pytest.mark.unit
@pytest.mark.parametrize(
    ("url", "credential", "field", "words"),
    [
        ("https://github.com/acme/repo.git", "/data/secret_key", "git_credential", "never a path"),
        (
            "https://github.com/acme/repo.git",
            "RAG_METRICS_TOKEN",
            "git_credential",
            "no credential 'RAG_METRICS_TOKEN'",
        ),
        ("https://127.0.0.1:8443/acme/repo.git", "acme", "git_credential", "never sent elsewhere"),
        ("http://127.0.0.1:8080/x.git", "", "git_url", "http://"),
        ("https://ghp_abcdefabcdef@github.com/acme/repo.git", "", "git_url", "token"),
        ("https://bob:pw@github.com/acme/repo.git", "", "git_url", "password"),
    ],
)
def test_a_credential_must_be_a_bound_name_for_the_url_and_http_is_refused(bound, url, credential, field, words):
    problems = git_remote_problems(url=url, credential=credential, config=bound)
    assert words in problems[field], problems


@pytest.mark.unit
def test_http_may_be_allowed_but_never_with_a_credential(bound):
    config = GitConfig(
        directory=bound.directory, timeout_seconds=30, credentials_dir=bound.credentials_dir, allow_http=True
    )
    assert git_remote_problems(url="http://git.internal/x.git", credential="", config=config) == {}
    problems = git_remote_problems(url="http://github.com/acme/repo.git", credential="acme", config=config)
    assert "never over http://" in problems["git_credential"]
    assert git_remote_problems(url="https://github.com/acme/repo.git", credential="acme", config=config) == {}


# URLs that crashed the check with ValueError (a 500 in the admin, an unexpected job error) until the issue 39 review.
UNPARSABLE = [
    ("https://[github.com/x", "acme", "does not parse"),
    ("https://github.com\uff0fevil.com/x", "acme", "does not parse"),  # a full-width solidus
    ("ssh://git@[github.com]/x", "deploy", "does not parse"),
    ("file:///base/x%00y", "", "NUL"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("url", "credential", "words"), UNPARSABLE)
def test_a_url_that_does_not_parse_is_a_url_problem_not_a_crash(bound, url, credential, words):
    config = GitConfig(
        directory=bound.directory, timeout_seconds=30, credentials_dir=bound.credentials_dir, local_bases=("/base",)
    )
    problems = git_remote_problems(url=url, credential=credential, config=config)
    assert words in problems["git_url"] and set(problems) == {"git_url"}, problems


@pytest.mark.unit
def test_the_token_header_is_scoped_to_the_remote_and_no_redirect_is_followed():
    remote = git.Remote(url="https://github.com/acme/repo.git", branch="main", secret=TOKEN)
    env = git._environment(remote)
    config = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert "http.extraHeader" not in config
    assert config["http.https://github.com/.extraHeader"].startswith("Authorization: Basic ")
    assert config["http.followRedirects"] == "false"
    assert config["protocol.allow"] == "never" and config["protocol.https.allow"] == "always"
    assert "protocol.http.allow" not in config and "protocol.file.allow" not in config


class Listener:
    """A plain HTTP server on 127.0.0.1 that records what reaches it (and answers 404, or redirects)."""

    def __init__(self, redirect: str = "") -> None:
        self.requests: list[dict[str, str]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                seen.append(dict(self.headers))
                self.send_response(302 if redirect else 404)
                if redirect:
                    self.send_header("Location", redirect + self.path)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.mark.unit
def test_git_sends_the_scoped_header_to_the_remote_it_is_scoped_to(listener, tmp_path):
    # Plumbing only (sources/git.py): the checks above never let a secret go over http://, but a local https
    # listener would need a certificate git trusts. This proves git applies the origin-scoped header.
    remote = git.Remote(url=f"http://127.0.0.1:{listener.port}/x.git", branch="main", secret=TOKEN)
    repo = git.Repo(git_dir=str(tmp_path / "c.git"), work_tree=str(tmp_path / "c"), timeout=30)
    with pytest.raises(git.GitError):
        git.repo_fetch(repo, remote)
    sent = [headers.get("Authorization", "") for headers in listener.requests]
    assert sent and all(
        value == "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode() for value in sent
    )


@pytest.mark.unit
def test_a_redirect_never_carries_the_header_to_another_origin(listener, tmp_path):
    redirecting = Listener(redirect=f"http://127.0.0.1:{listener.port}")
    try:
        remote = git.Remote(url=f"http://127.0.0.1:{redirecting.port}/x.git", branch="main", secret=TOKEN)
        repo = git.Repo(git_dir=str(tmp_path / "c.git"), work_tree=str(tmp_path / "c"), timeout=30)
        with pytest.raises(git.GitError):
            git.repo_fetch(repo, remote)
    finally:
        redirecting.close()
    assert redirecting.requests and listener.requests == []


def run(root: WorkspaceRoot) -> IndexJob:
    job, _ = jobs.root_job_request(root_id=root.pk, trigger="admin", ignore_cooldown=True)
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    job.refresh_from_db()
    return job


@pytest.fixture
def var(tmp_path, settings, bound):
    settings.VAR_DIR = tmp_path / "var"
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path / "dirs")]
    settings.RAG_GIT_CREDENTIALS_DIR = bound.credentials_dir
    return settings.VAR_DIR


def http_root(url: str, **fields) -> WorkspaceRoot:
    path = git_roots.root_git_path(name="repo", config=git_config())
    return WorkspaceRoot.objects.create(name="repo", path=path, git_url=url, cooldown_seconds=0, **fields)


@pytest.mark.django_db
def test_a_credential_bound_to_the_listener_s_host_is_never_sent_over_http(var, listener, bound, settings):
    settings.RAG_GIT_ALLOW_HTTP = True
    bind(Path(bound.credentials_dir), "local", f'host = "127.0.0.1:{listener.port}"\ntoken = "{TOKEN}"\n')
    job = run(http_root(f"http://127.0.0.1:{listener.port}/x.git", git_credential="local"))
    assert job.status == JobStatus.FAILED and "never over http://" in job.message, job.message
    assert listener.requests == []


@pytest.mark.django_db
def test_without_a_credential_an_allowed_http_remote_is_fetched_and_carries_no_secret(var, listener, settings):
    settings.RAG_GIT_ALLOW_HTTP = True
    job = run(http_root(f"http://127.0.0.1:{listener.port}/x.git"))
    assert job.status == JobStatus.FAILED and "git fetch failed" in job.message, job.message
    assert listener.requests and not any("Authorization" in headers for headers in listener.requests)


@pytest.mark.django_db
def test_a_root_migrated_with_a_credential_file_fails_its_job_saying_how_to_bind_it(var, listener):
    root = http_root(
        "https://github.com/acme/repo.git", git_credential_legacy="the credential file /app/var/secret_key"
    )
    job = run(root)
    assert job.status == JobStatus.FAILED
    assert "the credential file /app/var/secret_key is no longer accepted" in job.message
    assert 'RAG_GIT_CREDENTIALS_DIR as NAME.toml (host = "github.com"' in job.message


@pytest.mark.django_db
def test_the_admin_refuses_an_http_remote_and_an_unbound_or_misbound_credential(admin_client, var, listener):
    from tests.sources.test_admin_console import root_form

    def post(**changes) -> dict[str, str]:
        form = root_form(
            var, path="", **{"git_url": "https://github.com/acme/repo.git", "git_branch": "main", **changes}
        )
        response = admin_client.post("/admin/sources/workspaceroot/add/", form)
        assert response.status_code == 200
        return {field: " ".join(errors) for field, errors in response.context["adminform"].form.errors.items()}

    assert "http://" in (post(git_url=f"http://127.0.0.1:{listener.port}/x.git")["git_url"])
    assert "No credential 'secret_key'" in (post(git_credential="secret_key")["git_credential"])
    assert "never a path" in (post(git_credential="/app/var/secret_key")["git_credential"])
    misbound = post(git_url="https://127.0.0.1/acme/repo.git", git_credential="acme")["git_credential"]
    assert "bound to https at github.com/acme" in misbound
    assert not WorkspaceRoot.objects.exists() and listener.requests == []
