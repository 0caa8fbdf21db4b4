"""The admin's index overview and "try a search" pages: each needs its named permission, and shows the person's scope
only."""

import dataclasses

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from access.identity import identity_for_user, scope_for
from access.scope import Scope
from kernel.errors import ApplicationError, Forbidden
from retrieval.search import Mode, chunks_search
from sources.models import words
from surfaces.admin.scoping import admin_scope
from surfaces.selectors import index_overview

# The named permissions (retrieval.AccessGrant's Meta.permissions): is_staff alone opens neither page.
OVERVIEW_PERMISSION = "retrieval.view_index_overview"
TRY_SEARCH_PERMISSION = "retrieval.use_try_search"


def overview_view(request):
    if not request.user.has_perm(OVERVIEW_PERMISSION):
        raise PermissionDenied
    context = {
        **admin.site.each_context(request),
        "title": "Index overview",
        **index_overview(scope=admin_scope(request)),
    }
    return TemplateResponse(request, "admin/sources/overview.html", context)


def try_search_view(request):
    """Search as a chosen bot, client and channels would, with every score explained: only as one the person may act
    for."""
    if not request.user.has_perm(TRY_SEARCH_PERMISSION):
        raise PermissionDenied
    get = request.GET
    asked = {name: get.get(name, "").strip() for name in ("q", "bot_id", "client_id", "channels", "mode")}
    context = {
        **admin.site.each_context(request),
        "title": "Try a search",
        "asked": asked,
        "modes": [m.value for m in Mode],
    }
    status = 200
    if asked["q"]:
        try:
            scope = try_search_scope(
                request.user, bot_id=asked["bot_id"], client_id=asked["client_id"], channels=words(asked["channels"])
            )
            context["result"] = chunks_search(
                query=asked["q"][:2000], k=20, scope=scope, mode=Mode.parse(asked["mode"] or Mode.HYBRID.value)
            )
        except Forbidden as exc:
            context["error"], status = exc.message, 403
        except ApplicationError as exc:
            context["error"] = exc.message
    return TemplateResponse(request, "admin/sources/try_search.html", context, status=status)


def try_search_scope(user, *, bot_id: str, client_id: str, channels: list[str]) -> Scope:
    """The scope of the caller being tried: what is asked, refused (Forbidden) beyond what ``user`` may see.

    ``scope_for`` checks the asked values against the person's grants, as
    the page and the API do. A value not asked is an unknown caller's (shared
    sources only), not everything the person may see: the page tries one
    caller, so narrowing further is always safe and never widens.
    """
    scope = scope_for(
        identity_for_user(user), bot_id=bot_id or None, client_id=client_id or None, channels=channels or None
    )
    return dataclasses.replace(
        scope,
        bot_ids=scope.bot_ids if bot_id else (),
        client_ids=scope.client_ids if client_id else (),
        channels=scope.channels if channels else (),
    )
