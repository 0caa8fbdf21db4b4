"""What the admin console lets a person write beyond its forms: actions, API keys, sources, chunks, segments and
ungated rows, each within the person's permissions and grants (surfaces/admin/scoping.py, access/admin.py).

The security review of issue 39: Django runs an action for anyone who may view a list and never asks about the
selected rows; the key admin took any bot and the manage switch; a Source or chunk was not scoped; an empty
channel was "not asked" instead of "every channel".
"""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from access.models import AccessGrant, ApiKey
from kernel.errors import ApplicationError
from sources import services, tasks
from sources.memories import MemoryScope, Provenance, memory_write
from sources.models import Chunk, Memory, Segment, Skill, Source, UploadedDocument, WorkspaceRoot
from tests.sources.test_admin_console import root_form

pytestmark = pytest.mark.django_db


def person(django_user_model, *codenames: str, name: str = "staff", **grant) -> Client:
    """A staff account with these permissions ("app.codename") and, when given, one grant."""
    user = django_user_model.objects.create_user(name, password="x-long-password-1", is_staff=True)
    for codename in codenames:
        app, code = codename.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=code))
    if grant:
        AccessGrant.objects.create(user=user, **grant)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def queued(monkeypatch) -> list:
    """What the admin's actions queue: (kind, id) for every re-index asked for."""
    calls: list = []
    monkeypatch.setattr(tasks, "item_enqueue", lambda *, kind, pk, **_: calls.append((kind, pk)))

    def root_request(*, root_id, **_):
        calls.append(("root", root_id))
        raise ApplicationError("recorded, not queued")  # the admin shows it as a warning

    monkeypatch.setattr(tasks, "root_reindex_request", root_request)
    return calls


def act(client: Client, model: str, action: str, ids: list[int]):
    app = "access" if model == "apikey" else "sources"
    return client.post(
        reverse(f"admin:{app}_{model}_changelist"), {"action": action, "_selected_action": [str(pk) for pk in ids]}
    )


def pending(text: str, **scope) -> Memory:
    return memory_write(
        text=text, scope=MemoryScope(**scope), provenance=Provenance(author="API key test"), approved=False
    )


# --- 1. actions need the change permission, and leave shared rows to access.write_shared ---------------------------


def test_a_viewer_runs_no_action_on_any_list(django_user_model, tmp_path, settings, queued):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    memory = pending("Wombat: pending for alpha.", bot_id="alpha")
    skill = Skill.objects.create(slug="deploy", body="# D\n\nShip.\n", bot_id="alpha")
    (tmp_path / "alpha").mkdir()
    root = WorkspaceRoot.objects.create(name="alpha", path=str(tmp_path / "alpha"), bot_id="alpha")
    from sources import uploads

    document = uploads.document_upload(
        uploads.Upload("a.csv", b"a,b\n1,2\n"), max_bytes=1 << 20, bot_id="alpha"
    ).document
    key = ApiKey.objects.create(name="bot", prefix="abcd1234", bot_id="alpha")
    views = [f"sources.view_{model}" for model in ("memory", "skill", "workspaceroot", "uploadeddocument")]
    viewer = person(django_user_model, *views, "access.view_apikey", bot_id="alpha")
    queued.clear()  # writing the rows queued their first indexing

    actions = (
        ("memory", "approve", memory),
        ("memory", "reindex", memory),
        ("skill", "reindex", skill),
        ("skill", "reindex_force", skill),
        ("workspaceroot", "reindex", root),
        ("workspaceroot", "reindex_force", root),
        ("uploadeddocument", "reindex", document),
        ("apikey", "revoke", key),
    )
    for model, action, row in actions:
        response = act(viewer, model, action, [row.pk])
        assert response.status_code in (200, 302), (model, action)
    memory.refresh_from_db()
    key.refresh_from_db()
    assert memory.approved_at is None and key.revoked_at is None
    assert queued == []
    for model, action, _ in actions:  # not offered either
        page = viewer.get(reverse(f"admin:{'access' if model == 'apikey' else 'sources'}_{model}_changelist"))
        assert f'value="{action}"' not in page.content.decode(), (model, action)


def test_a_shared_row_is_approved_or_reindexed_only_with_write_shared(django_user_model, queued):
    shared, alpha = pending("Wombat: shared, pending."), pending("Wombat: alpha, pending.", bot_id="alpha")
    skills = {
        name: Skill.objects.create(slug=name, body=f"# {name}\n\nText.\n", **scope)
        for name, scope in (("everyone", {}), ("mine", {"bot_id": "alpha"}))
    }
    editor = person(
        django_user_model, "sources.view_memory", "sources.change_memory", "sources.view_skill", "sources.change_skill",
        bot_id="alpha",
    )  # fmt: skip
    queued.clear()

    response = act(editor, "memory", "approve", [shared.pk, alpha.pk])
    assert response.status_code == 302
    shared.refresh_from_db()
    alpha.refresh_from_db()
    assert shared.approved_at is None and alpha.approved_at is not None
    act(editor, "memory", "reindex", [shared.pk, alpha.pk])
    act(editor, "skill", "reindex_force", [skills["everyone"].pk, skills["mine"].pk])
    assert queued == [("memory", alpha.pk), ("skill", skills["mine"].pk)]
    assert "access.write_shared" in editor.get(reverse("admin:sources_skill_changelist")).content.decode()
    # Django's own bulk delete asks about each selected row: a shared one stays.
    deleter = person(django_user_model, "sources.view_skill", "sources.delete_skill", name="deleter", bot_id="alpha")
    removed = deleter.post(
        reverse("admin:sources_skill_changelist"),
        {"action": "delete_selected", "_selected_action": [str(skills["everyone"].pk)], "post": "yes"},
    )
    assert removed.status_code == 403 and Skill.objects.filter(pk=skills["everyone"].pk).exists()

    writer = person(
        django_user_model, "sources.view_memory", "sources.change_memory", "access.write_shared", name="writer",
        bot_id="alpha",
    )  # fmt: skip
    act(writer, "memory", "approve", [shared.pk])
    shared.refresh_from_db()
    assert shared.approved_at is not None


def test_a_shared_roots_reindex_button_needs_write_shared(django_user_model, tmp_path, settings, queued):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "shared").mkdir()
    root = WorkspaceRoot.objects.create(name="shared", path=str(tmp_path / "shared"))
    editor = person(django_user_model, "sources.view_workspaceroot", "sources.change_workspaceroot", bot_id="alpha")
    assert editor.post(reverse("admin:sources_workspaceroot_reindex", args=[root.pk])).status_code == 403
    act(editor, "workspaceroot", "reindex_force", [root.pk])
    assert queued == []


# --- 2. the API-key admin: within the person's grants, and no manage keys --------------------------------------------


def key_form(**changes) -> dict:
    fields = {
        "name": "bot",
        "bot_id": "",
        "client_id": "",
        "channels": "",
        "rate_limit_per_minute": "",
        "expires_at_0": "",
        "expires_at_1": "",
    }
    return {**fields, **changes}


def test_a_person_makes_keys_only_within_their_grants_and_never_manage_keys(django_user_model):
    codenames = [f"access.{verb}_apikey" for verb in ("add", "change", "view", "delete")]
    keeper = person(django_user_model, *codenames, bot_id="alpha")
    add = reverse("admin:access_apikey_add")

    refused = keeper.post(add, key_form(bot_id="beta"))
    assert refused.status_code == 200 and "Your access grants do not cover bot beta" in refused.content.decode()
    gated = keeper.post(add, key_form(bot_id="alpha", channels="finance"))
    assert "Your access grants do not cover channel finance" in gated.content.decode()
    assert not ApiKey.objects.exists()
    # The manage switch is not on the form: ticking it anyway gives an ordinary key of bot alpha.
    assert 'name="can_manage"' not in keeper.get(add).content.decode()
    made = keeper.post(add, key_form(name="alpha bot", bot_id="alpha", can_manage="on"))
    assert made.status_code == 200  # the page that shows the new key once
    key = ApiKey.objects.get(name="alpha bot")
    assert key.bot_id == "alpha" and not key.can_manage

    beta = ApiKey.objects.create(name="beta bot", prefix="beta0001", bot_id="beta")
    manage = ApiKey.objects.create(name="manager", prefix="mngr0001", can_manage=True)
    page = keeper.get(reverse("admin:access_apikey_changelist")).content.decode()
    assert "alpha bot" in page and "beta bot" not in page and "manager" not in page
    act(keeper, "apikey", "revoke", [beta.pk, manage.pk, key.pk])
    beta.refresh_from_db()
    manage.refresh_from_db()
    key.refresh_from_db()
    assert beta.revoked_at is None and manage.revoked_at is None and key.revoked_at is not None
    assert keeper.get(reverse("admin:access_apikey_change", args=[beta.pk])).status_code == 302  # "doesn't exist"


def test_a_superuser_still_makes_any_key(admin_client):
    made = admin_client.post(reverse("admin:access_apikey_add"), key_form(name="boss key", can_manage="on"))
    assert made.status_code == 200
    assert ApiKey.objects.get(name="boss key").can_manage


# --- 4. a person bound to channels (or a client, a bot) names some: empty is every one -------------------------------


def test_a_person_granted_a_channel_gives_a_skill_only_to_some_of_their_channels(django_user_model):
    codenames = ["sources.add_skill", "sources.change_skill", "sources.view_skill"]
    author = person(django_user_model, *codenames, bot_id="alpha", channels="ops")
    form = {"slug": "deploy", "title": "", "enabled": "on", "body": "# Deploy\n\nShip it.\n", "client_id": ""}
    add = reverse("admin:sources_skill_add")

    ungated = author.post(add, {**form, "bot_id": "alpha", "channels": ""})
    assert ungated.status_code == 200 and "every channel would read it" in ungated.content.decode()
    botless = author.post(add, {**form, "bot_id": "", "channels": "ops"})
    assert botless.status_code == 200 and "every bot would read it" in botless.content.decode()
    assert not Skill.objects.exists()
    assert author.post(add, {**form, "bot_id": "alpha", "channels": "ops"}).status_code == 302


def test_a_person_granted_a_bot_without_channels_writes_ungated_rows(django_user_model):
    codenames = ["sources.add_skill", "sources.view_skill"]
    author = person(django_user_model, *codenames, bot_id="alpha")
    form = {"slug": "deploy", "title": "", "enabled": "on", "body": "# Deploy\n\nShip it.\n", "client_id": ""}
    assert (
        author.post(reverse("admin:sources_skill_add"), {**form, "bot_id": "alpha", "channels": ""}).status_code == 302
    )


def test_a_person_granted_a_channel_gives_a_root_only_to_some_of_their_channels(django_user_model, tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo").mkdir()
    codenames = [f"sources.{verb}_workspaceroot" for verb in ("add", "change", "view")]
    author = person(django_user_model, *codenames, bot_id="alpha", channels="ops")
    add = reverse("admin:sources_workspaceroot_add")
    ungated = author.post(add, root_form(tmp_path / "repo", bot_id="alpha"))
    assert ungated.status_code == 200 and "every channel would read it" in ungated.content.decode()
    assert not WorkspaceRoot.objects.exists()
    assert author.post(add, root_form(tmp_path / "repo", bot_id="alpha", channels="ops")).status_code == 302


def test_a_document_uploaded_in_the_admin_by_a_channel_bound_person_names_a_channel(django_user_model):
    from django.core.files.uploadedfile import SimpleUploadedFile

    codenames = [f"sources.{verb}_uploadeddocument" for verb in ("add", "change", "view")]
    author = person(django_user_model, *codenames, bot_id="alpha", channels="ops")
    add = reverse("admin:sources_uploadeddocument_add")

    def upload(channels: str):
        file = SimpleUploadedFile("a.csv", b"a,b\n1,2\n")
        return author.post(
            add, {"upload": file, "enabled": "on", "bot_id": "alpha", "client_id": "", "channels": channels}
        )

    assert "every channel would read it" in upload("").content.decode()
    assert not UploadedDocument.objects.exists()
    assert upload("ops").status_code == 302


# --- 5. a Source and its chunks are as shared as their owner ---------------------------------------------------------


def test_a_shared_skills_source_and_chunks_are_written_only_with_write_shared(django_user_model):
    skill = Skill.objects.create(slug="everyone", body="# Everyone\n\nThe shared procedure.\n")
    services.skill_index(skill_id=skill.pk)
    source = Source.objects.get(key="skill:everyone")
    chunk = Chunk.objects.filter(source=source).first()
    codenames = [f"sources.{verb}_{model}" for verb in ("view", "change", "delete") for model in ("source", "chunk")]
    editor = person(django_user_model, *codenames, bot_id="alpha")

    assert editor.get(reverse("admin:sources_source_change", args=[source.pk])).status_code == 200  # read only
    edit = editor.post(reverse("admin:sources_source_change", args=[source.pk]), {"title": "Hijacked"})
    assert edit.status_code == 403
    assert editor.post(reverse("admin:sources_source_delete", args=[source.pk]), {"post": "yes"}).status_code == 403
    assert editor.post(reverse("admin:sources_chunk_delete", args=[chunk.pk]), {"post": "yes"}).status_code == 403
    source.refresh_from_db()
    assert source.title != "Hijacked" and Chunk.objects.filter(pk=chunk.pk).exists()

    writer = person(django_user_model, *codenames, "access.write_shared", name="writer", bot_id="alpha")
    assert writer.post(reverse("admin:sources_chunk_delete", args=[chunk.pk]), {"post": "yes"}).status_code == 302
    assert not Chunk.objects.filter(pk=chunk.pk).exists()


# --- 7. a segment's channels are within the person's grants ----------------------------------------------------------


def test_a_person_gates_a_segment_only_to_their_own_channels(django_user_model, tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo").mkdir()
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"), bot_id="alpha", channels="ops")
    codenames = [
        f"sources.{verb}_{model}" for verb in ("add", "change", "view") for model in ("workspaceroot", "segment")
    ]
    author = person(django_user_model, *codenames, bot_id="alpha", channels="ops")
    change = reverse("admin:sources_workspaceroot_change", args=[root.pk])

    def with_segment(channels: str) -> dict:
        return root_form(
            tmp_path / "repo",
            name="repo",
            bot_id="alpha",
            channels="ops",
            **{
                "segments-TOTAL_FORMS": "1",
                "segments-0-name": "finance",
                "segments-0-path_glob": "finance/**",
                "segments-0-embedding_model_name": "",
                "segments-0-similarity_threshold": "",
                "segments-0-channels": channels,
            },
        )

    refused = author.post(change, with_segment("finance"))
    assert refused.status_code == 200 and "Your access grants do not cover channel finance" in refused.content.decode()
    assert not Segment.objects.exists()
    assert author.post(change, with_segment("ops")).status_code == 302
    assert Segment.objects.get().channels == "ops"
