"""The admin console obeys the one scope rule: a person sees in it what the search page shows them.

A staff account's Django permissions say which kinds of things it may
open; its grants (``access.identity.identity_for_user``) say whose. Both
apply: rows outside the person's scope are left out of every list, and
their pages answer 404, the same as a row that does not exist (as the
page and the API answer). Shared rows (no bot, client or channel: every
caller reads them) are shown to everyone but written, added, changed or
deleted, only with ``access.write_shared`` (``access.rights``), as over the
API. Superusers see and write everything.
"""

from django import forms
from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import Http404

from access.identity import Identity, identity_for_user, scope_for
from access.managing import FIELD_WORDS, form_scope_refused
from access.rights import Right, is_shared
from access.scope import Scope
from kernel.errors import Forbidden
from sources.models import Chunk, Scoped, Source, words
from surfaces.admin.common import ModelAdminBase


def admin_identity(request) -> Identity:
    """The signed-in person's identity (grants and rights); worked out once per request."""
    identity = getattr(request, "_admin_identity", None)
    if identity is None:
        identity = request._admin_identity = identity_for_user(request.user)
    return identity


def admin_scope(request) -> Scope:
    """The signed-in person's scope, as the search page builds it; worked out once per request."""
    scope = getattr(request, "_admin_scope", None)
    if scope is None:
        scope = request._admin_scope = scope_for(admin_identity(request))
    return scope


def shared_row_writable(request, row) -> bool:
    """False for a shared row (no bot, client or channel) when the person may not write the shared scope.

    A skill, tool, root, document or memory has its own scope; a Source row has the one copied from its owner, and
    a chunk its source's: deleting a shared skill's Source (and its chunks) is writing the shared scope too.
    """
    if row is None:
        return True
    if isinstance(row, Chunk):
        row = row.source
    if not isinstance(row, Scoped | Source):
        return True
    shared = is_shared(bot_id=row.bot_id, client_id=row.client_id, channels=row.channels)
    return not shared or admin_identity(request).may(Right.WRITE_SHARED)


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

    def has_change_permission(self, request, obj=None) -> bool:
        # A shared row stays readable (its page opens read only) to those who may not write the shared scope.
        return super().has_change_permission(request, obj) and shared_row_writable(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and shared_row_writable(request, obj)

    def rows_changeable(self, request, queryset: QuerySet) -> list:
        """The rows of an action's ``queryset`` the person may change; a message names how many were left alone.

        Django runs an action for whoever may view the list and never asks about each row: the actions carry
        ``permissions=["change"]``, and this drops the shared rows a person without ``access.write_shared`` may
        only read.
        """
        rows = list(queryset)
        allowed = [row for row in rows if self.has_change_permission(request, row)]
        if left := len(rows) - len(allowed):
            self.message_user(
                request,
                f"{left} selected {self.opts.verbose_name_plural if left > 1 else self.opts.verbose_name} left alone: "
                f"shared (every caller reads it), and changing the shared scope needs the permission "
                f"{Right.WRITE_SHARED.value}.",
                messages.WARNING,
            )
        return allowed

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
    identity = admin_identity(request)

    class ScopeChecked(form):  # type: ignore[valid-type,misc]  # a class known only at run time
        def clean(self):
            cleaned = super().clean()
            if exc := form_scope_refused(identity, cleaned, not_wider=True):
                field = exc.details.get("field")
                what = FIELD_WORDS.get(field, "scope")
                refused = exc.details.get("refused", [])
                self.add_error(
                    field if field in self.fields else None,
                    f"Your access grants do not cover {what} {', '.join(refused)}: "
                    "you may only give it to bots, clients and channels you may see yourself."
                    if refused
                    else f"Left empty, every {what} would read it, beyond your access grants: "
                    f"{exc.message.rsplit('; ', 1)[-1]}.",
                )
                return cleaned
            scope = {name: cleaned.get(name) or "" for name in ("bot_id", "client_id", "channels")}
            if is_shared(**scope) and not identity.may(Right.WRITE_SHARED):
                self.add_error(
                    "bot_id" if "bot_id" in self.fields else None,
                    "Without a bot, client or channel it would be shared: every caller would read it. Writing the "
                    f"shared scope needs the permission {Right.WRITE_SHARED.value} (an admin gives it on your user or "
                    "group page); give it to a bot, client or channel your grants cover.",
                )
            return cleaned

    ScopeChecked.__name__ = form.__name__
    return ScopeChecked


class ScopedInlineMixin:
    """An inline list (segments of a root) showing only the rows whose source the person may see, and taking only
    channels the person's grants cover."""

    source_path = "source"

    def get_queryset(self, request):
        return scoped(request, super().get_queryset(request), source_path=self.source_path)

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        if not request.user.is_superuser and "channels" in formset.form.base_fields:
            formset.form = channels_checked(formset.form, request)
        return formset


def channels_checked(form: type[forms.ModelForm], request) -> type[forms.ModelForm]:
    """``form`` (a segment's: no bot or client of its own) refusing channels beyond the person's grants.

    A segment's channels replace its root's for the files it claims: a person granted (alpha, ops) could otherwise
    gate a segment of alpha's root to finance, writing into a channel they may not read. Empty: the root's (checked
    with the root).
    """
    identity = admin_identity(request)

    class ChannelsChecked(form):  # type: ignore[valid-type,misc]  # a class known only at run time
        def clean(self):
            cleaned = super().clean()
            try:
                scope_for(identity, channels=words(cleaned.get("channels") or "") or None)
            except Forbidden as exc:
                self.add_error(
                    "channels" if "channels" in self.fields else None,
                    f"Your access grants do not cover channel {', '.join(exc.details.get('refused', []))}: "
                    "you may only gate it to channels you may see yourself.",
                )
            return cleaned

    ChannelsChecked.__name__ = form.__name__
    return ChannelsChecked
