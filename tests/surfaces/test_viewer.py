"""The viewer: a whole skill or file, highlighted, with line anchors; scope as in the API."""

import pytest

from sources import services
from sources.models import Skill, WorkspaceRoot
from tests.conftest import index_root

pytestmark = pytest.mark.django_db


@pytest.fixture
def repo(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "app.py").write_text("def ship():\n    return 'narwhal'\n\n\ndef dock():\n    return 'pier'\n")
    private = tmp_path / "private"
    private.mkdir()
    (private / "secret_plan.py").write_text("def plan():\n    return 'hidden'\n")
    public = WorkspaceRoot.objects.create(name="shared", path=str(shared))
    index_root(public)
    index_root(WorkspaceRoot.objects.create(name="private", path=str(private), bot_id="alpha"))
    return public


def test_a_file_opens_whole_with_every_line_addressable_and_highlighted(person, client, repo):
    page = client.get(f"/view/file/{repo.pk}/app.py").content.decode()
    assert (
        '<span id="L-5"><span class="linenos">5</span><span class="k">def</span>' in page
    )  # highlighted, line 5 anchored
    assert 'data-cite="app.py"' in page and "6 lines" in page
    assert "js/viewer.js" in page and ".highlight .k" in page
    assert client.get("/view/file/shared/app.py").status_code == 200  # the root by name too


def test_a_changed_file_is_shown_as_it_is_now_and_says_so(person, client, repo, tmp_path):
    (tmp_path / "shared" / "app.py").write_text("def ship():\n    return 'otter'\n")
    page = client.get(f"/view/file/{repo.pk}/app.py").content.decode()
    assert "otter" in page and "changed on disk since it was indexed" in page


def test_what_the_person_may_not_see_is_not_found_like_what_does_not_exist(person, client, repo):
    private = WorkspaceRoot.objects.get(name="private")
    hidden = client.get(f"/view/file/{private.pk}/secret_plan.py")
    missing = client.get(f"/view/file/{repo.pk}/nowhere.py")
    assert hidden.status_code == missing.status_code == 404
    assert "def plan" not in hidden.content.decode()
    assert f"root &#x27;{private.pk}&#x27; not found" in hidden.content.decode()  # as for a root id that does not exist
    assert "root &#x27;999999&#x27; not found" in client.get("/view/file/999999/secret_plan.py").content.decode()
    assert client.get(f"/view/file/{repo.pk}/../private/secret_plan.py").status_code == 404


def test_a_skill_opens_as_its_markdown_with_line_anchors(person, client):
    skill = Skill.objects.create(slug="deploy", body="# Deploy\n\n## Roll back\n\nRevert the tag.\n")
    services.skill_index(skill_id=skill.pk)
    page = client.get("/view/skill/deploy").content.decode()
    assert 'data-cite="skill:deploy"' in page and '<span id="L-3">' in page and "Roll back" in page
    Skill.objects.filter(pk=skill.pk).update(enabled=False)
    assert client.get("/view/skill/deploy").status_code == 404


def test_the_viewer_needs_a_signed_in_person(client, repo):
    response = client.get(f"/view/file/{repo.pk}/app.py")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
