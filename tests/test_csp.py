"""The Content-Security-Policy: on every page, strict (no inline script, no inline style attribute), and what each page
sends obeys it: every script is a file of this site, every <style> element carries the response's nonce."""

from html.parser import HTMLParser

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse

from sources import jobs, services
from sources.models import WorkspaceRoot
from surfaces import csp
from tests.factories import SkillFactory

HEADER = "Content-Security-Policy"


def directives(header: str) -> dict[str, list[str]]:
    parsed = {}
    for part in header.split(";"):
        if words := part.split():
            parsed[words[0]] = words[1:]
    return parsed


class _InlineFinder(HTMLParser):
    """What in a page a strict policy blocks: inline scripts, handlers, style attributes, <style> without the nonce."""

    def __init__(self, nonce: str | None) -> None:
        super().__init__()
        self.nonce = nonce
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script" and not named.get("src") and named.get("type") != "application/json":
            self.problems.append(f"inline <script> at line {self.getpos()[0]}")
        if tag == "style" and (self.nonce is None or named.get("nonce") != self.nonce):
            self.problems.append(f"<style> without the response's nonce at line {self.getpos()[0]}")
        for name, value in attrs:
            if name.startswith("on") or name.startswith("hx-on") or name == "style":
                self.problems.append(f"{name}= on <{tag}> at line {self.getpos()[0]}")
            if name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith(
                "javascript:"
            ):
                self.problems.append(f"a javascript: URL in {name}= on <{tag}>")
            if name == "hx-vals" and (value or "").lstrip().startswith("js:"):
                self.problems.append("hx-vals evaluates JavaScript (needs unsafe-eval)")


def inline_problems(html: str, nonce: str | None) -> list[str]:
    finder = _InlineFinder(nonce)
    finder.feed(html)
    return finder.problems


@pytest.fixture
def site(db, tmp_path, settings):
    """A skill that searches and opens, a root with a queued job, for the pages that show them."""
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    skill = SkillFactory(slug="deploy", body="# Deploy\n\n## Rollback\n\nRevert the release tag.\n")
    services.skill_index(skill_id=skill.pk)
    (tmp_path / "repo").mkdir()
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"))
    job, _ = jobs.root_job_request(root_id=root.pk, trigger="test")
    return {"skill": skill.pk, "root": root.pk, "job": job.pk}


# (name, who, method, URL or a function of the site's ids): every HTML page and fragment the site serves.
PAGES = [
    ("login", None, "get", "/accounts/login/"),
    ("admin login", None, "get", "/admin/login/"),
    ("not found", None, "get", "/no-such-page"),
    ("CSRF failure", None, "csrf", "/accounts/login/"),
    ("search page", "person", "get", "/"),
    ("search results", "person", "get", "/?q=rollback+release"),
    ("search results fragment", "person", "htmx", "/?q=rollback+release"),
    ("viewer", "person", "get", "/view/skill/deploy"),
    ("viewer, not found", "person", "get", "/view/skill/no-such-skill"),
    ("admin index", "admin", "get", "/admin/"),
    ("overview", "admin", "get", "/admin/overview/"),
    ("try-search", "admin", "get", "/admin/try-search/?q=rollback"),
    ("skill list", "admin", "get", "/admin/sources/skill/"),
    ("skill add (preview button)", "admin", "get", "/admin/sources/skill/add/"),
    ("skill change (chunk list)", "admin", "get", lambda ids: f"/admin/sources/skill/{ids['skill']}/change/"),
    ("skill preview fragment", "admin", "post", "/admin/sources/skill/preview/"),
    ("root list", "admin", "get", "/admin/sources/workspaceroot/"),
    ("root change (root files)", "admin", "get", lambda ids: f"/admin/sources/workspaceroot/{ids['root']}/change/"),
    ("job list", "admin", "get", "/admin/sources/indexjob/"),
    ("job page (live progress)", "admin", "get", lambda ids: f"/admin/sources/indexjob/{ids['job']}/change/"),
    ("job live fragment", "admin", "get", lambda ids: reverse("admin:sources_indexjob_live", args=[ids["job"]])),
    ("API key created", "admin", "post", "/admin/access/apikey/add/"),
    ("API docs", None, "get", "/api/docs"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "who", "method", "url"), PAGES, ids=[p[0] for p in PAGES])
def test_every_page_carries_a_strict_policy_and_obeys_it(
    name, who, method, url, site, client, admin_client, django_user_model
):
    if who == "person":
        client.force_login(django_user_model.objects.create_user("person", password="a-long-test-password"))
    browser = admin_client if who == "admin" else client
    url = url(site) if callable(url) else url
    if method == "csrf":  # a form posted without its token (a stale page): Django's 403 page
        browser = Client(enforce_csrf_checks=True)
        response = browser.post(url, {"username": "someone", "password": "wrong"})
    elif method == "post":
        data = (
            {"body": "# Deploy\n\nShip it.\n"}
            if "preview" in url
            else {"name": "ci bot", "bot_id": "", "client_id": "", "channels": ""}
        )
        response = browser.post(url, data)
    else:
        response = browser.get(url, headers={"HX-Request": "true"} if method == "htmx" else {})
    assert response.status_code == (403 if method == "csrf" else 404 if "not found" in name else 200), name
    assert "text/html" in response["Content-Type"]
    policy = directives(response[HEADER])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval, no nonce: scripts are files
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert "'unsafe-inline'" not in policy["style-src"] and "'unsafe-inline'" not in policy.get("style-src-attr", [])
    nonces = [s[len("'nonce-") : -1] for s in policy["style-src"] if s.startswith("'nonce-")]
    assert inline_problems(response.content.decode(), nonces[0] if nonces else None) == []


@pytest.mark.django_db
def test_the_nonce_is_sent_only_when_a_page_uses_it_and_is_new_each_time(site, client, django_user_model):
    client.force_login(django_user_model.objects.create_user("person", password="a-long-test-password"))
    first, second = (directives(client.get("/view/skill/deploy")[HEADER])["style-src"] for _ in range(2))
    assert first[0] == "'self'" and first[1].startswith("'nonce-") and first != second
    assert directives(client.get("/accounts/login/")[HEADER])["style-src"] == ["'self'"]


@pytest.mark.django_db
def test_json_answers_carry_the_policy_too(client):
    response = client.get("/api/v1/no-such-endpoint")
    assert response.status_code == 404 and directives(response[HEADER])["default-src"] == ["'self'"]


@pytest.mark.django_db
def test_report_only_mode_sends_the_same_policy_under_the_report_only_header(client, settings):
    settings.RAG_CSP_REPORT_ONLY = True
    response = client.get("/accounts/login/")
    assert HEADER not in response
    assert directives(response[f"{HEADER}-Report-Only"])["frame-ancestors"] == ["'none'"]


@pytest.mark.unit
def test_extra_sources_join_the_defaults_and_new_directives_start_from_default_src():
    policy = csp.policy_build(
        extra="img-src https://img.example.com data:; connect-src https://api.example.com; "
        "report-uri https://reports.example.com/csp; object-src https://plugins.example"
    )
    assert policy["img-src"] == ["'self'", "data:", "https://img.example.com"]  # data: once: it is in the default
    assert policy["connect-src"] == ["'self'", "https://api.example.com"]
    assert policy["report-uri"] == ["https://reports.example.com/csp"]
    assert policy["object-src"] == ["https://plugins.example"]  # 'none' with a source is not a list browsers agree on
    assert policy["script-src"] == ["'self'"] and policy["frame-ancestors"] == ["'none'"]
    assert csp.policy_build(extra="") == csp.policy_build(extra=" ; ")


@pytest.mark.unit
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("img-scr https://x", "unknown directive 'img-scr'"),
        ("img-src self", "write 'self' with its single quotes"),
        ("img-src", "names no source"),
        ("img-src https://x, https://y", "a comma"),
        ("script-src 'unsafe-inline", "unbalanced quote"),
    ],
)
def test_a_malformed_extra_policy_fails_at_start_up_naming_the_variable(extra, message):
    with pytest.raises(ImproperlyConfigured, match="RAG_CSP_EXTRA") as caught:
        csp.policy_build(extra=extra)
    assert message in str(caught.value)


def _admin_pages() -> list[str]:
    from django.contrib import admin

    pages = []
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        pages += [reverse("admin:{}_{}_changelist".format(*info)), reverse("admin:{}_{}_add".format(*info))]
    return pages


@pytest.mark.django_db
def test_every_admin_list_and_add_page_obeys_the_policy(admin_client):
    """Django's admin and the apps' (django-celery-beat's periodic task form had an inline script)."""
    problems = {}
    for url in _admin_pages():
        response = admin_client.get(url)
        if response.status_code == 403:  # an admin that allows no adding (index jobs)
            continue
        assert response.status_code == 200, url
        nonce = next(
            (s[len("'nonce-") : -1] for s in directives(response[HEADER])["style-src"] if s.startswith("'nonce-")), None
        )
        if found := inline_problems(response.content.decode(), nonce):
            problems[url] = found
    assert problems == {}
