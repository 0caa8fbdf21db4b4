"""The scope matrix, extended to the admin console: every identity x every console view shows exactly what it may.

tests/access/test_access_matrix.py checks the API, MCP and the page; this
checks the admin console (issue 22, finding 1 and 12b). Each tenant's skill,
tool, root, segment and failure carries a marker word in everything the
console could print (slug, name, path, message); a page's answer is reduced
to the markers it shows, and that set must equal the identity's row.
"""

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse

from access.models import AccessGrant
from sources import jobs, services, tools
from sources.models import Chunk, IndexJob, JobStatus, Segment, Skill, Source, Tool, WorkspaceRoot
from tests.conftest import index_root

pytestmark = pytest.mark.django_db

# marker -> scope. Shared ones every console identity sees; the others only through a grant.
SKILLS = {
    "quokkashared": {},
    "quokkaalpha": {"bot_id": "alpha"},
    "quokkabeta": {"bot_id": "beta"},
    "quokkaacme": {"client_id": "acme"},
    "quokkavip": {"channels": "vip"},
}
TOOLS = {"quokkatoolshared": {}, "quokkatoolbeta": {"bot_id": "beta"}}
FAILING = "quokkafailbeta"  # a skill of bot beta whose indexing failed: its reason shows in the overview
JOB_MESSAGE = "quokkajobbeta"  # a failed job of beta's root, its message naming the server path
ROOTS = {"quokkarootshared": {}, "quokkarootbeta": {"bot_id": "beta"}}
SEGMENT = "quokkasegvip"  # the shared root's docs/ segment, gated to channel vip
BETA = {"quokkabeta", "quokkatoolbeta", FAILING, JOB_MESSAGE, "quokkarootbeta"}
ALL = {*SKILLS, *TOOLS, *ROOTS, FAILING, JOB_MESSAGE, SEGMENT}
SHARED = {"quokkashared", "quokkatoolshared", "quokkarootshared"}

# identity -> the markers it must see, exactly (None: no console permission at all).
VISIBLE: dict[str, set[str] | None] = {
    "superuser": ALL,
    "staff_bare": None,  # is_staff only: "You don't have permission to view or edit anything"
    "staff_no_grants": SHARED,
    "staff_alpha": SHARED | {"quokkaalpha"},
    "staff_acme": SHARED | {"quokkaacme"},
    "staff_vip": SHARED | {"quokkavip", SEGMENT},
    "group_beta": SHARED | BETA,
}
# try-search's widening parameters: what each asks for, and the markers it adds when allowed.
WIDENING = {
    "bot_id=beta": ({"bot_id": "beta"}, "beta"),
    "client_id=acme": ({"client_id": "acme"}, "acme"),
    "channels=vip": ({"channels": "vip"}, "vip"),
}
MAY_ASK = {
    "superuser": {"beta", "acme", "vip"},
    "staff_no_grants": set(),
    "staff_alpha": set(),
    "staff_acme": {"acme"},
    "staff_vip": {"vip"},
    "group_beta": {"beta"},
}
SEARCHED = {
    "beta": {"quokkabeta", "quokkatoolbeta", "quokkarootbeta"},
    "acme": {"quokkaacme"},
    "vip": {"quokkavip", SEGMENT},
}
QUERY = " ".join(sorted(ALL))
MODELS = ("skill", "tool", "workspaceroot", "segment", "indexjob", "chunk", "source")
CONSOLE = [
    ("access", "view_index_overview"),
    ("access", "use_try_search"),
    *(("sources", f"view_{model}") for model in MODELS),
    ("sources", "change_indexjob"),
]


@pytest.fixture
def tenants(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    for kind in ("SKILL", "FILE", "TOOL"):
        setattr(settings, f"RAG_SIMILARITY_THRESHOLD_{kind}", -1.0)  # every chunk is a hit
    for marker, scope in SKILLS.items():
        services.skill_index(
            skill_id=Skill.objects.create(slug=marker, body=f"# {marker}\n\nThe {marker} procedure.\n", **scope).pk
        )
    failing = Skill.objects.create(slug=FAILING, body="# B\n", bot_id="beta")
    services.skill_index_failed(skill_id=failing.pk, reason=f"{FAILING}: the model could not be loaded")
    for marker, scope in TOOLS.items():
        tools.tool_index(tool_id=Tool.objects.create(name=f"run_{marker}", description=f"Runs {marker}.", **scope).pk)
    roots = {}
    for marker, scope in ROOTS.items():
        directory = tmp_path / marker
        (directory / "docs").mkdir(parents=True)
        (directory / f"{marker}.md").write_text(f"# {marker}\n\nThe {marker} procedure.\n")
        roots[marker] = WorkspaceRoot.objects.create(name=marker, path=str(directory), **scope)
    (tmp_path / "quokkarootshared" / "docs" / f"{SEGMENT}.md").write_text(f"# {SEGMENT}\n\nThe {SEGMENT} procedure.\n")
    (tmp_path / "quokkarootshared" / "docs" / f"{SEGMENT}-blob.md").write_bytes(
        b"\x7fELF\x00\x00"
    )  # skipped: a job problem
    Segment.objects.create(root=roots["quokkarootshared"], name=SEGMENT, path_glob="docs/**", channels="vip")
    shared_job, beta_job = index_root(roots["quokkarootshared"]), index_root(roots["quokkarootbeta"])
    beta_path = roots["quokkarootbeta"].path
    IndexJob.objects.filter(pk=beta_job.pk).update(
        status=JobStatus.FAILED, message=f"{JOB_MESSAGE}: {beta_path} is gone"
    )
    active = {
        name: jobs.root_job_request(root_id=root.pk, trigger="test", ignore_cooldown=True)[0]
        for name, root in roots.items()
    }
    return {"roots": roots, "finished": {"quokkarootshared": shared_job, "quokkarootbeta": beta_job}, "active": active}


def person(identity: str, django_user_model) -> Client:
    client = Client()
    if identity == "superuser":
        client.force_login(django_user_model.objects.create_superuser("boss", password="x-long-password-1"))
        return client
    user = django_user_model.objects.create_user(identity, password="x-long-password-2", is_staff=True)
    permissions = [Permission.objects.get(content_type__app_label=app, codename=codename) for app, codename in CONSOLE]
    grants = {"staff_alpha": {"bot_id": "alpha"}, "staff_acme": {"client_id": "acme"}, "staff_vip": {"channels": "vip"}}
    if identity == "group_beta":  # permissions and the grant both come from the group
        team = Group.objects.create(name="beta team")
        team.permissions.set(permissions)
        AccessGrant.objects.create(group=team, bot_id="beta")
        user.groups.add(team)
    elif identity != "staff_bare":
        user.user_permissions.set(permissions)
        if identity in grants:
            AccessGrant.objects.create(user=user, **grants[identity])
    client.force_login(user)
    return client


def markers(html: str) -> set[str]:
    return {marker for marker in ALL if marker in html}


def answered(response) -> str:
    """try-search's page below its form (the form repeats the query, which names every marker)."""
    return response.content.decode().rsplit("</form>", 1)[-1]


def test_the_console_permissions_exist_with_their_migration():
    codenames = set(Permission.objects.filter(content_type__app_label="access").values_list("codename", flat=True))
    assert {"view_index_overview", "use_try_search"} <= codenames


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_the_overview_and_try_search_show_only_the_persons_scope(identity, tenants, django_user_model):
    client = person(identity, django_user_model)
    expected = VISIBLE[identity]
    overview = client.get("/admin/overview/")
    plain = client.get("/admin/try-search/", {"q": QUERY})
    home = client.get("/admin/").content.decode()
    if expected is None:
        assert (overview.status_code, plain.status_code) == (403, 403)
        assert markers(overview.content.decode() + answered(plain)) == set()
        assert 'href="/admin/overview/"' not in home and 'href="/admin/try-search/"' not in home
        for asked, _ in WIDENING.values():
            widened = client.get("/admin/try-search/", {"q": QUERY, **asked})
            assert widened.status_code == 403 and markers(answered(widened)) == set()
        return
    assert 'href="/admin/overview/"' in home and 'href="/admin/try-search/"' in home
    assert overview.status_code == 200
    page = overview.content.decode()
    # Failing items, job messages (with their server paths) and job lists: only of what the person sees.
    assert markers(page) & {FAILING, JOB_MESSAGE, "quokkarootbeta"} == expected & {
        FAILING,
        JOB_MESSAGE,
        "quokkarootbeta",
    }
    assert (tenants["roots"]["quokkarootbeta"].path in page) == ("quokkarootbeta" in expected)
    visible_skills = len(expected & ({*SKILLS, FAILING}))
    assert f"<td>Skill</td><td>{visible_skills}</td>" in page

    # Not asked: an unknown caller's view (shared only), whoever asks.
    assert plain.status_code == 200 and markers(answered(plain)) == SHARED
    for name, (asked, tenant) in WIDENING.items():
        widened = client.get("/admin/try-search/", {"q": QUERY, **asked})
        html = answered(widened)
        if tenant in MAY_ASK[identity]:
            assert widened.status_code == 200, name
            assert markers(html) - {FAILING} == SHARED | SEARCHED[tenant], name
        else:  # refused with a reason on the page, never widened
            assert widened.status_code == 403, name
            assert "may not act for" in html and markers(html) == set(), name


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_the_console_lists_and_pages_show_only_the_persons_scope(identity, tenants, django_user_model):
    client = person(identity, django_user_model)
    expected = VISIBLE[identity]
    lists = {
        model: client.get(f"/admin/sources/{model}/")
        for model in ("skill", "tool", "workspaceroot", "indexjob", "chunk", "source")
    }
    if expected is None:
        assert {model: r.status_code for model, r in lists.items()} == dict.fromkeys(lists, 403)
    else:
        assert {model: r.status_code for model, r in lists.items()} == dict.fromkeys(lists, 200)
        assert markers(lists["skill"].content.decode()) == expected & {*SKILLS, FAILING}
        assert markers(lists["tool"].content.decode()) == expected & set(TOOLS)
        assert markers(lists["workspaceroot"].content.decode()) == expected & set(ROOTS)
        assert markers(lists["indexjob"].content.decode()) == expected & {
            *ROOTS,
            JOB_MESSAGE,
        }  # rows, messages, the root filter
        assert markers(lists["source"].content.decode()) == expected - {JOB_MESSAGE}
        searched = client.get(
            "/admin/sources/chunk/", {"q": "procedure"}
        ).content.decode()  # chunk lists cite slug or path
        assert markers(searched) == expected & ({*SKILLS, *ROOTS, SEGMENT} - {FAILING})

    # Each object page: 200 when visible, otherwise 404 as if it did not exist.
    def status(url: str, marker: str) -> None:
        response = client.get(url)
        wanted = 403 if expected is None else 200 if marker in expected else 404
        assert response.status_code == wanted, (url, marker)
        if wanted != 200:
            assert markers(response.content.decode()) == set(), url

    for slug in (*SKILLS, FAILING):
        skill = Skill.objects.get(slug=slug)
        status(f"/admin/sources/skill/{skill.pk}/change/", slug)  # its stored chunks are on it
        status(f"/admin/sources/skill/{skill.pk}/history/", slug)
    for marker in TOOLS:
        status(f"/admin/sources/tool/{Tool.objects.get(name=f'run_{marker}').pk}/change/", marker)
    for marker, root in tenants["roots"].items():
        status(f"/admin/sources/workspaceroot/{root.pk}/change/", marker)  # with its files list
        status(f"/admin/sources/indexjob/{tenants['finished'][marker].pk}/change/", marker)  # with its problems
        status(reverse("admin:sources_indexjob_live", args=[tenants["active"][marker].pk]), marker)
        source = Source.objects.get(key=f"root:{root.pk}")
        status(f"/admin/sources/chunk/{Chunk.objects.filter(source=source).first().pk}/change/", marker)
        status(f"/admin/sources/source/{source.pk}/change/", marker)
    beta_skill_chunk = Chunk.objects.filter(source__key="skill:quokkabeta").first()
    status(f"/admin/sources/chunk/{beta_skill_chunk.pk}/change/", "quokkabeta")

    if expected is not None:
        # The shared root's page lists its files and segments, but the vip segment's only to those who see it.
        shared = client.get(
            f"/admin/sources/workspaceroot/{tenants['roots']['quokkarootshared'].pk}/change/"
        ).content.decode()
        assert "quokkarootshared.md" in shared
        assert (SEGMENT in shared) == (SEGMENT in expected)
        # Its job's problems name the vip segment's skipped file only to those who see that segment (the Skipped
        # row's counts by kind of reason, "binary file 1", name no file).
        job = client.get(
            f"/admin/sources/indexjob/{tenants['finished']['quokkarootshared'].pk}/change/"
        ).content.decode()
        assert (f"{SEGMENT}-blob.md" in job) == (SEGMENT in expected)
        assert (SEGMENT in job) == (SEGMENT in expected)
        vip = Source.objects.get(segment__name=SEGMENT)
        status(f"/admin/sources/source/{vip.pk}/change/", SEGMENT)


@pytest.mark.parametrize("identity", list(VISIBLE))
def test_cancelling_a_job_needs_the_change_permission_and_the_jobs_scope(identity, tenants, django_user_model):
    client = person(identity, django_user_model)
    expected = VISIBLE[identity]
    for marker, job in tenants["active"].items():
        response = client.post(reverse("admin:sources_indexjob_cancel", args=[job.pk]))
        wanted = 403 if expected is None else 302 if marker in expected else 404
        assert response.status_code == wanted, marker
        job.refresh_from_db()
        assert (job.status == JobStatus.CANCELLED) == (wanted == 302), marker
    assert (
        client.get(
            reverse("admin:sources_indexjob_cancel", args=[tenants["active"]["quokkarootshared"].pk])
        ).status_code
        == 405
    )


def test_a_viewer_without_the_change_permission_cannot_cancel_a_job(tenants, django_user_model):
    user = django_user_model.objects.create_user("viewer", password="x-long-password-3", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="sources", codename="view_indexjob"))
    client = Client()
    client.force_login(user)
    job = tenants["active"]["quokkarootshared"]
    assert client.get(f"/admin/sources/indexjob/{job.pk}/change/").status_code == 200
    assert client.post(reverse("admin:sources_indexjob_cancel", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


def test_the_chunking_preview_needs_the_add_or_change_permission(django_user_model):
    user = django_user_model.objects.create_user("viewer", password="x-long-password-4", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="sources", codename="view_skill"))
    client = Client()
    client.force_login(user)
    assert client.post(reverse("admin:sources_skill_preview"), {"body": "# A\n\nB.\n"}).status_code == 403


def test_the_cancel_button_shows_only_to_those_who_may_cancel(tenants, django_user_model, admin_client):
    user = django_user_model.objects.create_user("viewer", password="x-long-password-5", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="sources", codename="view_indexjob"))
    viewer = Client()
    viewer.force_login(user)
    job = tenants["active"]["quokkarootshared"]
    for client, shown in ((viewer, False), (admin_client, True)):
        assert ("Cancel this job" in client.get(f"/admin/sources/indexjob/{job.pk}/change/").content.decode()) == shown
        assert (
            "Cancel this job" in client.get(reverse("admin:sources_indexjob_live", args=[job.pk])).content.decode()
        ) == shown


def test_a_person_may_give_a_skill_only_to_a_bot_their_grants_cover(django_user_model):
    user = django_user_model.objects.create_user("author", password="x-long-password-6", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="sources", codename__in=["add_skill", "change_skill", "view_skill"]
        )
    )
    AccessGrant.objects.create(user=user, bot_id="alpha")
    client = Client()
    client.force_login(user)
    form = {
        "slug": "deploy",
        "title": "",
        "enabled": "on",
        "body": "# Deploy\n\nShip it.\n",
        "client_id": "",
        "channels": "",
    }
    refused = client.post("/admin/sources/skill/add/", {**form, "bot_id": "beta"})
    assert refused.status_code == 200 and "Your access grants do not cover bot beta" in refused.content.decode()
    assert not Skill.objects.exists()
    gated = client.post("/admin/sources/skill/add/", {**form, "bot_id": "alpha", "channels": "vip"})
    assert "Your access grants do not cover channel vip" in gated.content.decode() and not Skill.objects.exists()
    assert client.post("/admin/sources/skill/add/", {**form, "bot_id": "alpha"}).status_code == 302
    skill = Skill.objects.get(slug="deploy")
    assert client.get(f"/admin/sources/skill/{skill.pk}/change/").status_code == 200  # visible to its author at once


def test_a_person_granted_one_bot_writes_a_shared_root_only_with_the_write_shared_permission(
    tmp_path, settings, django_user_model
):
    """Issue 39 item 4: a root without bot, client or channel is read by every caller; no bot is no right to it."""
    from tests.sources.test_admin_console import root_form

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    for name in ("mine", "everyone", "existing"):
        (tmp_path / name).mkdir()
    existing = WorkspaceRoot.objects.create(name="existing", path=str(tmp_path / "existing"))
    user = django_user_model.objects.create_user("rooter", password="x-long-password-7", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="sources",
            codename__in=["add_workspaceroot", "change_workspaceroot", "delete_workspaceroot", "view_workspaceroot"],
        )
    )
    AccessGrant.objects.create(user=user, bot_id="alpha")
    client = Client()
    client.force_login(user)
    add = "/admin/sources/workspaceroot/add/"

    refused = client.post(add, root_form(tmp_path / "everyone", name="everyone"))
    assert refused.status_code == 200 and "access.write_shared" in refused.content.decode()
    assert not WorkspaceRoot.objects.filter(name="everyone").exists()
    assert client.post(add, root_form(tmp_path / "mine", name="mine", bot_id="alpha")).status_code == 302
    assert WorkspaceRoot.objects.get(name="mine").bot_id == "alpha"

    # An existing shared root: its page opens (read only), a change or a delete is refused and changes nothing.
    change = f"/admin/sources/workspaceroot/{existing.pk}/change/"
    assert client.get(change).status_code == 200
    edit = root_form(tmp_path / "existing", name="existing", include_globs="*")
    assert client.post(change, edit).status_code == 403
    assert client.post(f"/admin/sources/workspaceroot/{existing.pk}/delete/", {"post": "yes"}).status_code == 403
    existing.refresh_from_db()
    assert existing.include_globs != "*"

    user.user_permissions.add(Permission.objects.get(content_type__app_label="access", codename="write_shared"))
    assert client.post(add, root_form(tmp_path / "everyone", name="everyone")).status_code == 302
    assert client.post(change, edit).status_code == 302
