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


def test_the_landing_page_offers_first_searches_that_find_something(client, person):
    body = "# Deploy\n\n## Rollback\n\nRevert the release tag.\n\n## Canary releases\n\nShip to one host first.\n"
    services.skill_index(skill_id=SkillFactory(slug="deploy", body=body).pk)
    page = client.get("/").content.decode()
    assert 'Try: <a href="?q=Rollback">Rollback</a> · <a href="?q=Canary%20releases">Canary releases</a>' in page
    found = client.get("/", {"q": "Canary releases"}, headers={"HX-Request": "true"}).content.decode()
    assert "Ship to one host first" in found
    assert "add a workspace root" not in page  # the hint is for those who may add one


def test_an_admin_with_no_files_is_shown_where_to_add_a_root(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("boss", password="a-long-test-password"))
    page = client.get("/").content.decode()
    assert '<a href="/admin/sources/workspaceroot/add/">add a workspace root</a>' in page


def test_htmx_requests_get_only_the_results_partial(client, person):
    services.skill_index(
        skill_id=SkillFactory(slug="deploy", body="# Deploy\n\n## Rollback\n\nRevert the release tag.\n").pk
    )
    full = client.get("/", {"q": "rollback release"}).content.decode()
    partial = client.get("/", {"q": "rollback release"}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" in full and "<html" not in partial
    assert 'id="results"' in partial


def test_a_skill_hit_names_its_heading_once(client, person):
    """The title, then the section trail without `#` marks or the title again, then the text under the heading:
    the hit used to repeat its heading three times (title, "# Deploy > ## Rollback", the rendered heading)."""
    services.skill_index(
        skill_id=SkillFactory(slug="deploy", body="# Deploy\n\n## Rollback\n\nRevert the release tag.\n").pk
    )
    partial = client.get("/", {"q": "rollback release"}, headers={"HX-Request": "true"}).content.decode()
    assert '<p class="path">skill · Rollback</p>' in partial
    assert "#" not in partial.split('<p class="path">')[1].split("</p>")[0]
    assert "<h2><mark>Rollback</mark></h2>" not in partial and "<p>Revert the <mark>release</mark> tag.</p>" in partial
    assert 'href="/view/skill/deploy#L1-L5"' in partial  # the link still opens the whole chunk, headings included


def test_caches_tell_the_page_from_its_fragment(client, person):
    full = client.get("/", {"q": "rollback"})
    partial = client.get("/", {"q": "rollback"}, headers={"HX-Request": "true"})
    for response in (full, partial):
        assert "HX-Request" in response["Vary"]
    assert "no-store" in partial["Cache-Control"]  # Back never finds the fragment in the browser's cache
    assert "no-store" not in full.get("Cache-Control", "")


def test_no_match_explains_itself(client, person):
    partial = client.get("/", {"q": "zzzqqq"}, headers={"HX-Request": "true"}).content.decode()
    assert "No results" in partial and "Nothing matches “zzzqqq”" in partial


def test_htmx_is_served_locally(client):
    response = client.get("/static/vendor/htmx/htmx.min.js")
    assert response.status_code == 200
    assert b"htmx" in b"".join(response.streaming_content)[:5000]


def test_file_hits_show_path_symbol_and_lines(client, person, tmp_path, settings):
    from sources import jobs, pipeline
    from sources.models import WorkspaceRoot

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "billing.py").write_text("import os\n\n\ndef refund_invoice(invoice):\n    return invoice.total\n")
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path))
    job, _ = jobs.root_job_request(root_id=root.pk)
    pipeline.root_index(job=jobs.job_start(job_id=job.pk))
    partial = client.get("/", {"q": "refund invoice"}, headers={"HX-Request": "true"}).content.decode()
    assert f'<a class="open" href="/view/file/{root.pk}/billing.py#L4-L5">billing.py</a>' in partial
    assert "<code>refund_invoice</code>" in partial and "<code>billing.py:4-5</code>" not in partial  # path once
    lines = '<span class="visually-hidden">Lines </span>4-5'
    assert f'title="billing.py:4-5"><a href="/view/file/{root.pk}/billing.py#L4-L5">{lines}</a>' in partial
    chunks = client.get("/", {"q": "refund invoice", "group": "chunk"}, headers={"HX-Request": "true"})
    assert "<code>billing.py:4-5</code>" in chunks.content.decode()  # every chunk its own card, cited in full
    # Highlighted code with the file's own line numbers, the query's words marked (also inside the identifier).
    assert '<pre class="linenos" aria-hidden="true">4\n5</pre>' in partial
    assert '<span class="nf"><mark>refund</mark>_<mark>invoice</mark></span>' in partial


@pytest.fixture
def mixed(tmp_path, settings):
    """Skills, a private skill, files in two roots (one private) and a tool: every kind the page shows."""
    from sources import tools
    from sources.models import Tool, WorkspaceRoot
    from tests.conftest import index_root

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    for name, bot in (("app", ""), ("vault", "alpha")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "deploy.py").write_text(
            f"def deploy_{name}():\n    '''Deploy the release.'''\n    return 1\n"
        )
        (tmp_path / name / "notes.md").write_text(f"# Notes\n\nDeploy {name} on Fridays.\n")
        index_root(WorkspaceRoot.objects.create(name=name, path=str(tmp_path / name), bot_id=bot))
    body = (
        "# Deploy\n\nRun `make deploy` <script>alert(1)</script> ![x](https://example.com/x.png)\n\n"
        "```bash\nmake deploy\n```\n"
    )
    services.skill_index(skill_id=SkillFactory(slug="deploy", body=body).pk)
    services.skill_index(
        skill_id=SkillFactory(slug="secret-deploy", body="# Deploy secrets\n\nDeploy the vault.\n", bot_id="alpha").pk
    )
    tools.tool_index(tool_id=Tool.objects.create(name="deploy_release", description="Deploy a release.").pk)
    return {root.name: root for root in WorkspaceRoot.objects.all()}


def test_the_landing_page_counts_every_kind_the_person_can_search(client, person, mixed):
    page = client.get("/").content.decode()
    assert "Searchable now: 1 skill, 2 files and 1 tool." in page  # the private root and skill are not counted


def test_filters_live_in_the_url_and_only_offer_what_the_person_can_see(client, person, mixed):
    page = client.get("/", {"q": "deploy", "kind": "file", "root": mixed["app"].pk, "mode": "lexical"}).content.decode()
    assert f'<option value="{mixed["app"].pk}" selected>app</option>' in page
    assert "vault" not in page and "secret-deploy" not in page  # the private root is neither offered nor found
    assert (
        '<option value="file" selected>Files</option>' in page
        and '<option value="lexical" selected>Words</option>' in page
    )
    assert page.count('class="hit"') == 2 and "/view/file/" in page and "/view/skill/" not in page
    python = client.get("/", {"q": "deploy", "language": "python"}, headers={"HX-Request": "true"}).content.decode()
    assert python.count('class="hit"') == 1 and "deploy.py" in python and "notes.md" not in python
    hidden = client.get(
        "/", {"q": "deploy", "root": mixed["vault"].pk}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "No results" in hidden  # asking for a root one cannot see finds nothing, like a root that does not exist


def test_skills_render_as_safe_markdown_with_the_query_marked(client, person, mixed):
    # Every chunk its own card: a file's card (the default) shows two lines of each, not the code block below.
    partial = client.get(
        "/", {"q": "make deploy", "kind": "skill", "group": "chunk"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "<h1><mark>Deploy</mark></h1>" not in partial  # the title above says it
    assert '<pre><code class="language-bash"><mark>make</mark> <mark>deploy</mark>' in partial
    assert "<script>" not in partial and "&lt;script&gt;" in partial  # raw HTML is shown, never run
    assert "<img" not in partial  # no image: nothing loads from elsewhere (the markdown stays a link)
    assert '<a class="open" href="/view/skill/deploy#L1-L7">' in partial


def test_a_tool_hit_shows_its_schema_on_demand(client, person, mixed):
    partial = client.get("/", {"q": "deploy release", "kind": "tool"}, headers={"HX-Request": "true"}).content.decode()
    assert '<details class="schema"><summary>Schema</summary>' in partial
    assert "&quot;name&quot;: &quot;deploy_release&quot;" in partial  # the schema a model would be given, escaped


def test_file_hits_name_their_root_when_two_roots_hold_the_same_path(client, person, tmp_path, settings):
    from sources.models import WorkspaceRoot
    from tests.conftest import index_root

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    for name in ("billing", "shipping"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "README.md").write_text(f"# {name}\n\nHow the {name} service retries webhooks.\n")
        index_root(WorkspaceRoot.objects.create(name=name, path=str(tmp_path / name)))
    partial = client.get("/", {"q": "retries webhooks"}, headers={"HX-Request": "true"}).content.decode()
    assert '<span class="root">billing /</span> README.md' in partial
    assert '<span class="root">shipping /</span> README.md' in partial


def test_show_more_returns_only_the_next_results_and_the_next_button(client, person, mixed, settings):
    from surfaces import views

    first = client.get("/", {"q": "deploy"}, headers={"HX-Request": "true"}).content.decode()
    assert first.count('class="hit"') == 4 and "Show more" not in first  # 4 visible hits, fewer than a page
    views.PAGE_SIZE, saved = 2, views.PAGE_SIZE
    try:
        first = client.get("/", {"q": "deploy"}, headers={"HX-Request": "true"}).content.decode()
        assert first.count('class="hit"') == 2 and 'hx-get="/?q=deploy&amp;page=2&amp;more=1"' in first
        more = client.get(
            "/", {"q": "deploy", "page": "2", "more": "1"}, headers={"HX-Request": "true"}
        ).content.decode()
        assert 'id="results"' not in more and more.count('class="hit"') == 2 and 'value="3"' in more
    finally:
        views.PAGE_SIZE = saved


def test_a_failed_search_says_so_instead_of_showing_old_results(client, person, mixed):
    from sources.models import EmbeddingModel, Source

    missing = EmbeddingModel.objects.create(provider="local", name="/nowhere/no-such-model", dimensions=8)
    Source.objects.update(embedding_model=missing)
    partial = client.get("/", {"q": "deploy", "mode": "vector"}, headers={"HX-Request": "true"}).content.decode()
    assert 'role="alert"' in partial and "The search failed" in partial and 'class="hit"' not in partial


def test_each_hit_explains_its_score_on_demand(client, person, mixed):
    partial = client.get("/", {"q": "deploy release"}, headers={"HX-Request": "true"}).content.decode()
    assert '<details class="why"><summary>Why #1</summary>' in partial
    assert "<dt>Words (BM25)</dt><dd>rank " in partial and "<dt>Meaning (vectors)</dt>" in partial
    assert " ms</span>" in partial and "result" in partial


def test_a_contextual_description_shows_on_the_page_and_in_api_hits(client, person, key_client):
    import json

    from sources.models import Chunk

    services.skill_index(skill_id=SkillFactory(slug="deploy", body="# Deploy\n\nShip it with compose.\n").pk)
    Chunk.objects.update(metadata={"contextual_description": "How the team ships releases to production."})
    partial = client.get("/", {"q": "ship releases"}, headers={"HX-Request": "true"}).content.decode()
    assert '<p class="context">How the team ships releases to production.</p>' in partial
    hits = key_client.post(
        "/api/v1/search", data=json.dumps({"query": "ship releases"}), content_type="application/json"
    ).json()["hits"]
    assert hits[0]["contextual_description"] == "How the team ships releases to production."


@pytest.fixture
def code(tmp_path, settings):
    from sources.models import WorkspaceRoot
    from tests.conftest import index_root

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "expressions.py").write_text(
        "class F:\n    '''A reference to a field of the model.'''\n\n    def resolve(self, query):\n"
        "        return query.resolve_ref(self.name)\n\n\n"
        "def fields_of(model):\n    return [F(name) for name in model.names]  # F() per name\n"
    )
    settings.RAG_CHUNK_MAX_CHARS = 120  # a class this long is a chunk per method
    (tmp_path / "changelist.py").write_text(
        'class ChangeList:\n    """The rows of the list page and the filters beside them."""\n\n'
        "    def get_filters(self, request):\n        return self.filter_specs, self.has_filters\n\n"
        "    def get_results(self, request):\n        return self.queryset.all()[: self.list_per_page]\n"
    )
    (tmp_path / "style.css").write_text(".filters { display: flex; }\n")
    return index_root(WorkspaceRoot.objects.create(name="django", path=str(tmp_path)))


def test_sym_finds_where_a_name_is_defined(client, person, code):
    partial = client.get("/", {"q": "sym:F"}, headers={"HX-Request": "true"}).content.decode()
    assert partial.count('class="hit"') == 1 and "<code>F</code>" in partial and "expressions.py" in partial
    dotted = client.get("/", {"q": "sym:ChangeList.get_filters"}, headers={"HX-Request": "true"}).content.decode()
    assert dotted.count('class="hit"') == 1 and "<code>ChangeList.get_filters</code>" in dotted
    method = client.get("/", {"q": "sym:get_filters"}, headers={"HX-Request": "true"}).content.decode()
    assert "changelist.py" in method and "style.css" not in method


def test_a_bare_identifier_shows_its_definition_above_the_results(client, person, code):
    partial = client.get("/", {"q": "F"}, headers={"HX-Request": "true"}).content.decode()
    assert '<section class="definitions" aria-label="Definitions">' in partial
    assert partial.index("Defined as <code>F</code>") < partial.index('class="hits"')
    assert f'href="/view/file/{code.root_id}/expressions.py#L' in partial.split("Defined as")[1].split("</section>")[0]


def test_re_and_quoted_text_find_lines_like_grep_with_the_match_marked(client, person, code):
    regex = client.get("/", {"q": r"re:def \w+_filters"}, headers={"HX-Request": "true"}).content.decode()
    assert "1 matching line in 1 file" in regex
    assert '<pre class="linenos" aria-hidden="true">4</pre>' in regex
    assert "    <mark>def get_filters</mark>(self, request):" in regex
    assert f'href="/view/file/{code.root_id}/changelist.py#L4"' in regex
    exact = client.get("/", {"q": '"F() per name"'}, headers={"HX-Request": "true"}).content.decode()
    assert "1 matching line in 1 file" in exact and "<mark>F() per name</mark>" in exact  # literal: ( ) are text
    bad = client.get("/", {"q": "re:(unclosed"}, headers={"HX-Request": "true"}).content.decode()
    assert 'role="alert"' in bad and "invalid regex" in bad
    none = client.get("/", {"q": '"no such words here"'}, headers={"HX-Request": "true"}).content.decode()
    assert "No matching lines" in none and "exact text" in none


def test_gibberish_gets_no_good_match_and_a_real_query_does_not(client, person, settings):
    """The first hit of any query is first: without evidence (a shared word, or a close meaning) the page says so."""
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = -1.0  # every skill reaches the page, however far: only the line decides
    services.skill_index(
        skill_id=SkillFactory(slug="deploy", body="# Deploy\n\n## Rollback\n\nRevert the release tag.\n").pk
    )
    gibberish = client.get("/", {"q": "kezuva mipotal"}, headers={"HX-Request": "true"}).content.decode()
    assert 'class="hit"' in gibberish and "No good match for “kezuva mipotal”" in gibberish
    real = client.get("/", {"q": "roll back a release"}, headers={"HX-Request": "true"}).content.decode()
    assert 'class="hit"' in real and "No good match" not in real
    close = client.get("/", {"q": "undo the last deployment", "mode": "vector"}, headers={"HX-Request": "true"})
    assert "No good match" not in close.content.decode()  # no shared word, but close in meaning


def test_a_search_while_skills_are_still_indexing_says_so_instead_of_try_other_words(client, person):
    SkillFactory(slug="demo", body="# Demo\n\nStill on its way.\n")
    partial = client.get("/", {"q": "zzzqqq"}, headers={"HX-Request": "true"}).content.decode()
    assert '<p class="warning">1 source is still being indexed; results may be incomplete</p>' in partial
    assert "Nothing matches “zzzqqq” yet. Search again once indexing ends" in partial
    assert "Try other words" not in partial
    grep = client.get("/", {"q": "re:zzz\\d+"}, headers={"HX-Request": "true"}).content.decode()
    assert "1 source is still being indexed" in grep


def test_a_definition_split_into_several_chunks_is_listed_once(client, person, tmp_path, settings):
    """ "Defined as" listed ChangeList.get_queryset twice: a method longer than a chunk is several chunks."""
    from sources.models import Chunk, WorkspaceRoot
    from tests.conftest import index_root

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_CHUNK_MAX_CHARS = 200
    body = "".join(f"        queryset = queryset.filter(field_{n}=self.value_{n})\n" for n in range(12))
    (tmp_path / "main.py").write_text(
        f"class ChangeList:\n    def get_queryset(self, request):\n        queryset = self.root\n{body}"
        "        return queryset\n"
    )
    index_root(WorkspaceRoot.objects.create(name="django", path=str(tmp_path)))
    assert Chunk.objects.filter(symbol="ChangeList.get_queryset").count() > 1  # the case this is about
    partial = client.get("/", {"q": "get_queryset"}, headers={"HX-Request": "true"}).content.decode()
    definitions = partial.split("Defined as", 1)[1].split("</section>", 1)[0]
    assert definitions.count("<code>ChangeList.get_queryset</code>") == 1


def test_a_hit_from_a_git_root_shows_the_commit_it_was_read_at(client, person, code):
    from sources.models import COMMIT_KEY, Chunk

    commit = "0123456789abcdef0123456789abcdef01234567"
    for chunk in Chunk.objects.filter(path="changelist.py"):
        Chunk.objects.filter(pk=chunk.pk).update(metadata={**chunk.metadata, COMMIT_KEY: commit})
    partial = client.get("/", {"q": "list page filters"}, headers={"HX-Request": "true"}).content.decode()
    card = partial.split("changelist.py", 1)[1].split("</article>", 1)[0]
    assert 'commit <code title="The commit it was read at">0123456789ab</code>' in card
    other = partial.split("expressions.py", 1)[1].split("</article>", 1)[0] if "expressions.py" in partial else ""
    assert "commit <code" not in other
