"""access.rights: a person's rights are the admin's permissions for the same actions, held as active staff only."""

import pytest
from django.contrib.auth.models import Group, Permission

from access.identity import identity_for_key, identity_for_user
from access.keys import api_key_create
from access.rights import ALL_RIGHTS, Right
from kernel.errors import Forbidden

pytestmark = pytest.mark.django_db


def permission(right: Right) -> Permission:
    app_label, codename = right.value.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def test_every_right_is_a_permission_the_admin_can_give():
    assert {permission(right).codename for right in Right} == {right.value.split(".")[1] for right in Right}


def test_staff_status_alone_grants_no_right(django_user_model):
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    assert identity_for_user(staff).rights == frozenset()


def test_a_staff_account_holds_the_rights_its_permissions_and_groups_give(django_user_model):
    staff = django_user_model.objects.create_user("staff", is_staff=True)
    staff.user_permissions.add(permission(Right.VIEW_ROOTS))
    team = Group.objects.create(name="operators")
    team.permissions.add(permission(Right.WRITE_SHARED))
    staff.groups.add(team)
    assert identity_for_user(django_user_model.objects.get(pk=staff.pk)).rights == {
        Right.VIEW_ROOTS,
        Right.WRITE_SHARED,
    }


def test_an_account_the_admin_would_not_let_in_holds_no_right_whatever_its_permissions(django_user_model):
    person = django_user_model.objects.create_user("person")
    gone = django_user_model.objects.create_user("gone", is_staff=True, is_active=False)
    for user in (person, gone):
        user.user_permissions.set([permission(right) for right in Right])
        assert identity_for_user(django_user_model.objects.get(pk=user.pk)).rights == frozenset()


def test_a_superuser_holds_every_right_and_a_key_every_one_only_with_manage(django_user_model):
    assert identity_for_user(django_user_model.objects.create_superuser("boss")).rights == ALL_RIGHTS
    assert identity_for_key(api_key_create(name="ops", can_manage=True)[0]).rights == ALL_RIGHTS
    assert identity_for_key(api_key_create(name="bot")[0]).rights == frozenset()


def test_a_refusal_names_the_missing_permission_and_who_gives_it(django_user_model):
    staff = identity_for_user(django_user_model.objects.create_user("staff", is_staff=True))
    with pytest.raises(Forbidden) as refused:
        staff.require(Right.ADD_DOCUMENTS)
    assert "sources.add_uploadeddocument" in refused.value.message and "staff status alone" in refused.value.message
