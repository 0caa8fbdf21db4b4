import pytest

from sources import services
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


def test_the_page_asks_for_sign_in_first(client):
    response = client.get("/", {"q": "anything"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
    htmx = client.get("/", {"q": "anything"}, headers={"HX-Request": "true"})
    assert htmx.headers["HX-Redirect"].startswith("/accounts/login/")  # a full-page redirect, not a swap
    login = client.get("/accounts/login/").content.decode()
    assert "Sign in" in login and 'name="password"' in login


def test_the_empty_page_says_what_to_do(client, person):
    page = client.get("/").content.decode()
    assert "Nothing is indexed yet" in page
    assert "vendor/htmx/htmx.min.js" in page


def test_htmx_requests_get_only_the_results_partial(client, person):
    services.skill_index(skill_id=SkillFactory(slug="deploy", body="# Deploy\n\n## Rollback\n\nRevert the release tag.\n").pk)
    full = client.get("/", {"q": "rollback release"}).content.decode()
    partial = client.get("/", {"q": "rollback release"}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" in full and "<html" not in partial
    assert "# Deploy &gt; ## Rollback" in partial
    assert 'id="results"' in partial


def test_no_match_explains_itself(client, person):
    partial = client.get("/", {"q": "zzzqqq"}, headers={"HX-Request": "true"}).content.decode()
    assert "No matches" in partial


def test_htmx_is_served_locally(client):
    response = client.get("/static/vendor/htmx/htmx.min.js")
    assert response.status_code == 200
    assert b"htmx" in b"".join(response.streaming_content)[:5000]


def test_file_hits_show_path_symbol_and_lines(client, person, tmp_path, settings):
    from sources import jobs, roots
    from sources.models import WorkspaceRoot

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "billing.py").write_text("import os\n\n\ndef refund_invoice(invoice):\n    return invoice.total\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path))
    job, _ = jobs.root_job_request(root_id=root.pk)
    roots.root_index(job=jobs.job_start(job_id=job.pk))
    partial = client.get("/", {"q": "refund invoice"}, headers={"HX-Request": "true"}).content.decode()
    assert "billing.py · <code>refund_invoice</code>" in partial
    assert "billing.py:4-5" in partial
