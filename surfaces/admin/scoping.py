"""The admin console obeys the one scope rule: a person sees in it what the search page shows them.

A staff account's Django permissions say which kinds of things it may
open; its grants (``access.identity.identity_for_user``) say whose. Both
apply: rows outside the person's scope are left out of every list, and
their pages answer 404, the same as a row that does not exist (as the
page and the API answer). Superusers see everything.
"""

from django import forms
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import Http404

from access.identity import identity_for_user, scope_for
from access.scope import Scope
from kernel.errors import Forbidden
from sources.models import words
from surfaces.admin.common import ModelAdminBase


def admin_scope(request) -> Scope:
    """The signed-in person's scope, as the search page builds it; worked out once per request."""
    scope = getattr(request, "_admin_scope", None)
    if scope is None:
        scope = request._admin_scope = scope_for(identity_for_user(request.user))
    return scope


def visible_source_ids(request) -> QuerySet:
    """The ids of the sources the person may see, disabled ones too (the admin manages those as well), as a subquery."""
    return admin_scope(request).source_ids_sql(enabled_only=False)


def row_scope(row) -> Scope:
    """The scope ``ScopedAdminMixin.get_object`` put on ``row``; without one, shared sources only (fail closed)."""
    return getattr(row, "admin_scope", None) or Scope()


def scoped(request, queryset: QuerySet, *, source_path: str) -> QuerySet:
    """``queryset`` narrowed to the rows whose source (reached by ``source_path``) the person may see."""
    if request.user.is_superuser:
        return queryset
    return queryset.filter(**{f"{source_path}__in": visible_source_ids(request)})


class ScopedAdminMixin(ModelAdminBase):
    """For the admin of a model whose rows belong to a source: lists and pages show only the person's scope.

    ``source_path`` reaches the row's Source ("source", "root__source";
    "pk" for the Source admin itself). Skills, tools, roots and segments get
    their Source row on save, before any indexing, so a new row is visible
    to its author at once (when it is within their scope).
    """

    source_path = "source"

    def get_queryset(self, request):
        return scoped(request, super().get_queryset(request), source_path=self.source_path)

    def visible_or_404(self, request, object_id: str):
        """The visible row ``object_id``; 403 for a person who may open no such row at all, else 404 when unseen."""
        if not (self.has_view_or_change_permission(request) or self.has_delete_permission(request)):
            raise PermissionDenied
        try:
            row = self.get_queryset(request).filter(pk=unquote(object_id)).first()
        except (ValueError, ValidationError):
            row = None
        if row is None:
            # Unlike Django's redirect to the index ("doesn't exist"): the page's and the API's answer.
            raise Http404(f"{self.opts.verbose_name} {object_id!s} does not exist")
        return row

    def get_object(self, request, object_id, from_field=None):
        row = super().get_object(request, object_id, from_field)
        if row is not None:
            # Display methods get the row only: what they list of its parts (a root's files) follows the person's scope.
            row.admin_scope = admin_scope(request)
        return row

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        if request.user.is_superuser or "bot_id" not in form.base_fields:
            return form
        return scope_checked(form, request)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        self.visible_or_404(request, object_id)
        return super().change_view(request, object_id, form_url, extra_context)

    def history_view(self, request, object_id, extra_context=None):
        self.visible_or_404(request, object_id)
        return super().history_view(request, object_id, extra_context)

    def delete_view(self, request, object_id, extra_context=None):
        self.visible_or_404(request, object_id)
        return super().delete_view(request, object_id, extra_context)


def scope_checked(form: type[forms.ModelForm], request) -> type[forms.ModelForm]:
    """``form`` refusing a bot, client or channels beyond the person's grants, as scope_for refuses them to a search.

    Otherwise a person granted bot alpha could give a skill to bot beta: put
    words into another tenant's answers, then lose sight of the row.
    """
    identity = identity_for_user(request.user)

    class ScopeChecked(form):  # type: ignore[valid-type,misc]  # a class known only at run time
        def clean(self):
            cleaned = super().clean()
            try:
                scope_for(
                    identity,
                    bot_id=cleaned.get("bot_id") or None,
                    client_id=cleaned.get("client_id") or None,
                    channels=words(cleaned.get("channels") or "") or None,
                )
            except Forbidden as exc:
                field = exc.details.get("field")
                what = {"bot_id": "bot", "client_id": "client", "channels": "channel"}.get(field, "scope")
                self.add_error(
                    field if field in self.fields else None,
                    f"Your access grants do not cover {what} {', '.join(exc.details.get('refused', []))}: "
                    "you may only give it to bots, clients and channels you may see yourself.",
                )
            return cleaned

    ScopeChecked.__name__ = form.__name__
    return ScopeChecked


class ScopedInlineMixin:
    """An inline list (segments of a root) showing only the rows whose source the person may see."""

    source_path = "source"

    def get_queryset(self, request):
        return scoped(request, super().get_queryset(request), source_path=self.source_path)
