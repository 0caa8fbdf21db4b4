"""The admin console's memories: list, search, filter by status and scope, edit, approve, delete, each within
the person's scope (surfaces/admin/scoping.py)."""

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from access.models import AccessGrant
from sources.memories import MemoryScope, Provenance, memory_index, memory_write
from sources.models import Chunk, IndexStatus, Memory, Source

pytestmark = pytest.mark.django_db

AUTHOR = Provenance(author="API key test")


def write(text: str, *, bot_id: str = "", approved: bool = True) -> Memory:
    return memory_write(text=text, scope=MemoryScope(bot_id=bot_id), provenance=AUTHOR, approved=approved)


@pytest.fixture
def memories():
    return {
        "shared": write("Wombatshared: the office closes at six."),
        "alpha": write("Wombatalpha: deploys happen on Tuesdays.", bot_id="alpha"),
        "beta": write("Wombatbeta: invoices go out on the first.", bot_id="beta", approved=False),
    }


def staff(django_user_model, *, bot_id: str) -> Client:
    user = django_user_model.objects.create_user(f"staff-{bot_id}", password="x-long-password-2", is_staff=True)
    codenames = ["view_memory", "change_memory", "delete_memory"]
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="sources", codename__in=codenames))
    AccessGrant.objects.create(user=user, bot_id=bot_id)
    client = Client()
    client.force_login(user)
    return client


def superuser(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("boss", password="x-long-password-1"))
    return client


def listed(client: Client, query: str = "") -> set[str]:
    response = client.get(reverse("admin:sources_memory_changelist") + query)
    assert response.status_code == 200
    html = response.content.decode()
    return {word for word in ("Wombatshared", "Wombatalpha", "Wombatbeta") if word in html}


def test_a_staff_member_sees_and_opens_only_the_memories_of_their_scope(memories, django_user_model):
    alpha = staff(django_user_model, bot_id="alpha")

    assert listed(alpha) == {"Wombatshared", "Wombatalpha"}
    assert listed(alpha, "?q=wombatbeta") == set()
    change = "admin:sources_memory_change"
    assert alpha.get(reverse(change, args=[memories["alpha"].pk])).status_code == 200
    assert alpha.get(reverse(change, args=[memories["beta"].pk])).status_code == 404
    assert alpha.get(reverse("admin:sources_memory_delete", args=[memories["beta"].pk])).status_code == 404


def test_the_list_searches_and_filters_by_status_and_scope(memories, django_user_model):
    boss = superuser(django_user_model)

    assert listed(boss) == {"Wombatshared", "Wombatalpha", "Wombatbeta"}
    assert listed(boss, "?q=invoices") == {"Wombatbeta"}
    assert listed(boss, "?status=pending") == {"Wombatbeta"}
    assert listed(boss, "?status=active") == {"Wombatshared", "Wombatalpha"}
    assert listed(boss, "?bot_id=alpha") == {"Wombatalpha"}


def test_an_admin_approves_a_pending_memory_and_it_is_served(memories, django_user_model):
    boss = superuser(django_user_model)
    beta = memories["beta"]
    assert not Source.objects.get(memory=beta).enabled

    response = boss.post(
        reverse("admin:sources_memory_changelist"),
        {"action": "approve", "_selected_action": [beta.pk]},
    )

    assert response.status_code == 302
    beta.refresh_from_db()
    assert beta.approved_at is not None and beta.approved_by.username == "boss"
    assert Source.objects.get(memory=beta).enabled


def test_an_admin_edit_corrects_the_text_and_queues_it_again_and_a_staff_member_cannot_give_it_to_another_bot(
    memories, django_user_model
):
    alpha_memory = memories["alpha"]
    memory_index(memory_id=alpha_memory.pk)
    form = {
        "text": "Wombatalpha: deploys happen on Thursdays.",
        "expires_at_0": "",
        "expires_at_1": "",
        "citation": "",
        "conversation_id": "",
        "bot_id": "alpha",
        "client_id": "",
        "channels": "",
    }
    alpha = staff(django_user_model, bot_id="alpha")
    path = reverse("admin:sources_memory_change", args=[alpha_memory.pk])

    widened = alpha.post(path, {**form, "bot_id": "beta"})
    saved = alpha.post(path, form)

    assert widened.status_code == 200 and "Your access grants do not cover" in widened.content.decode()
    assert saved.status_code == 302
    alpha_memory.refresh_from_db()
    assert alpha_memory.text.endswith("Thursdays.") and alpha_memory.index_status == IndexStatus.QUEUED
    memory_index(memory_id=alpha_memory.pk)
    assert Chunk.objects.get(source__memory=alpha_memory).content.endswith("Thursdays.")


def test_deleting_a_memory_in_the_admin_deletes_its_source_and_chunk(memories, django_user_model):
    shared = memories["shared"]
    memory_index(memory_id=shared.pk)
    boss = superuser(django_user_model)

    response = boss.post(reverse("admin:sources_memory_delete", args=[shared.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert not Memory.objects.filter(pk=shared.pk).exists()
    assert not Chunk.objects.filter(source__key=f"memory:{shared.pk}").exists()
