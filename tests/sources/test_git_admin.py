"""The admin's "Git repository" section (issue 25 item 1): a git root saved with a URL gets its checkout under
RAG_VAR_DIR/git, a webhook secret shown once, and its last commit and fetch error on the list."""

import pytest
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpRequest

from sources.config import webhook_key
from sources.git_hooks import webhook_secret
from sources.models import IndexJob, WorkspaceRoot
from tests.sources.test_admin_console import root_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def var(tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path / "dirs")]
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "github-org.toml").write_text('host = "github.com"\npath_prefix = "/org"\ntoken_file = "t"\n')
    settings.RAG_GIT_CREDENTIALS_DIR = str(credentials)
    return settings.VAR_DIR


def test_a_git_root_saved_in_the_admin_gets_its_checkout_and_a_secret_shown_once(admin_client, var):
    form = root_form(
        var, path="", git_url="https://github.com/org/repo.git", git_branch="main", git_credential="github-org"
    )
    response = admin_client.post("/admin/sources/workspaceroot/add/", {**form, "rotate_webhook_secret": "on"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    root = WorkspaceRoot.objects.get()
    assert root.path.startswith(str(var / "git")) and root.git_webhook_salt
    page = response.content.decode()
    assert "shown this once" in page and f"/api/v1/roots/{root.pk}/hook" in page
    assert webhook_secret(root=root, secret_key=webhook_key()) in page
    assert IndexJob.objects.filter(root=root).exists()  # its first index (clone) is queued at once
    change = admin_client.get(f"/admin/sources/workspaceroot/{root.pk}/change/").content.decode()
    assert "shown this once" not in change and "a secret is set" in change and "github-org" in change
    assert root.git_credential == "github-org"


def cookie_texts(response) -> list[str]:
    """Every Set-Cookie value, and the messages the messages cookie carries (signed and compressed, not encrypted)."""
    texts = []
    for name, morsel in response.cookies.items():
        texts.append(morsel.value)
        if name == CookieStorage.cookie_name and (stored := CookieStorage(HttpRequest())._decode(morsel.value)):
            texts.extend(str(message.message) for message in stored)
    return texts


@pytest.mark.parametrize("adding", [True, False])
def test_a_new_webhook_secret_never_goes_into_a_cookie(admin_client, var, adding):
    """The default message storage keeps messages in a cookie anyone holding it can read (issue 39 review, 10c)."""
    form = root_form(var, path="", git_url="https://github.com/org/repo.git", git_branch="main")
    if not adding:
        assert admin_client.post("/admin/sources/workspaceroot/add/", form).status_code == 302
    url = f"/admin/sources/workspaceroot/{WorkspaceRoot.objects.get().pk}/change/" if not adding else None
    response = admin_client.post(url or "/admin/sources/workspaceroot/add/", {**form, "rotate_webhook_secret": "on"})
    root = WorkspaceRoot.objects.get()
    secret = webhook_secret(root=root, secret_key=webhook_key())
    assert secret and not any(secret in text for text in cookie_texts(response))
    assert secret in response.content.decode()  # shown on the page itself, once
    after = admin_client.get(f"/admin/sources/workspaceroot/{root.pk}/change/")
    assert secret not in after.content.decode() and not any(secret in text for text in cookie_texts(after))


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"git_url": "https://bob:pw@github.com/org/repo.git"}, "git_url", "password"),
        ({"git_url": "https://ghp_abcdefabcdef0123@github.com/org/repo.git"}, "git_url", "token"),
        ({"git_url": "ftp://example.org/repo.git"}, "git_url", "must start with"),
        ({"git_url": "http://github.com/org/repo.git"}, "git_url", "http://"),
        ({"git_credential": "ghp_abcdef not a name"}, "git_credential", "never a path, a variable or a token"),
        ({"git_credential": "GITHUB_TOKEN"}, "git_credential", "No credential 'GITHUB_TOKEN' is bound"),
        ({"git_url": "https://gitlab.com/org/repo.git", "git_credential": "github-org"}, "git_credential", "bound to"),
        ({"git_url": "file:///srv/other/repo.git"}, "git_url", "must lie under RAG_ROOT_BASE_DIRS"),
        # These crashed the form with a 500 (ValueError from urlsplit or realpath) until the issue 39 review.
        ({"git_url": "https://[github.com/org/x", "git_credential": "github-org"}, "git_url", "does not parse"),
        ({"git_url": "https://github.com\uff0fevil.com/org/x", "git_credential": "github-org"}, "git_url", "parse"),
        ({"git_url": "ssh://git@[github.com]/org/x", "git_credential": "github-org"}, "git_url", "does not parse"),
        ({"git_url": "file:///srv/x%00y"}, "git_url", "NUL"),
    ],
)
def test_a_bad_git_section_is_refused_with_the_reason(admin_client, var, changes, field, words):
    form = root_form(var, path="", **{"git_url": "https://github.com/org/repo.git", "git_branch": "main", **changes})
    response = admin_client.post("/admin/sources/workspaceroot/add/", form)
    assert response.status_code == 200
    assert words in " ".join(response.context["adminform"].form.errors[field])
    assert not WorkspaceRoot.objects.exists()


def test_the_root_list_shows_the_last_commit_and_the_last_fetch_error(admin_client, var):
    WorkspaceRoot.objects.create(
        name="repo",
        path=str(var / "git" / "repo"),
        git_url="https://github.com/org/repo.git",
        git_commit="0123456789abcdef0123456789abcdef01234567",
        git_indexed_branch="main",
        git_error="git fetch failed: could not resolve host",
    )
    listing = admin_client.get("/admin/sources/workspaceroot/").content.decode()
    assert "0123456789ab" in listing and "Last fetch failed: git fetch failed: could not resolve host" in listing


def test_a_migrated_root_says_how_to_bind_its_credential_until_it_is_saved_with_a_bound_one(admin_client, var):
    root = WorkspaceRoot.objects.create(
        name="repo",
        path=str(var / "git" / "repo"),
        git_url="https://github.com/org/repo.git",
        git_credential_legacy="the environment variable GITHUB_TOKEN",
    )
    page = admin_client.get(f"/admin/sources/workspaceroot/{root.pk}/change/").content.decode()
    assert "The environment variable GITHUB_TOKEN is no longer accepted as a git credential" in page
    form = root_form(var, path="", git_url=root.git_url, git_branch="main", git_credential="github-org")
    response = admin_client.post(f"/admin/sources/workspaceroot/{root.pk}/change/", form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    root.refresh_from_db()
    assert root.git_credential == "github-org" and not root.git_credential_legacy


def test_a_git_root_offers_no_watch_box_since_the_watcher_ignores_it(admin_client, var):
    form = root_form(var, path="", git_url="https://github.com/org/repo.git", git_branch="main")
    admin_client.post("/admin/sources/workspaceroot/add/", {**form, "watch": "on"})
    root = WorkspaceRoot.objects.get()
    assert root.watch is False  # ticked on the add page (before it was a git root): not kept
    change = admin_client.get(f"/admin/sources/workspaceroot/{root.pk}/change/").content.decode()
    assert 'name="watch"' not in change and 'name="reverify_minutes"' in change
    directory = WorkspaceRoot.objects.create(name="dir", path=str(var))
    page = admin_client.get(f"/admin/sources/workspaceroot/{directory.pk}/change/").content.decode()
    assert 'name="watch"' in page
