"""The admin's index overview and "try a search" pages (staff only)."""

from django.contrib import admin
from django.template.response import TemplateResponse

from rag_site.errors import ApplicationError
from retrieval.scope import Scope
from retrieval.search import Mode, chunks_search
from sources.models import words
from sources.selectors import index_overview


def overview_view(request):
    context = {**admin.site.each_context(request), "title": "Index overview", **index_overview()}
    return TemplateResponse(request, "admin/sources/overview.html", context)


def try_search_view(request):
    """Search as a chosen bot, client and channels would, with every score explained (staff only)."""
    get = request.GET
    asked = {name: get.get(name, "").strip() for name in ("q", "bot_id", "client_id", "channels", "mode")}
    context = {**admin.site.each_context(request), "title": "Try a search", "asked": asked, "modes": [m.value for m in Mode]}
    if asked["q"]:
        channels = tuple(words(asked["channels"]))
        scope = Scope(bot_ids=(asked["bot_id"],) if asked["bot_id"] else (),
                      client_ids=(asked["client_id"],) if asked["client_id"] else (), channels=channels)
        try:
            context["result"] = chunks_search(query=asked["q"][:2000], k=20, scope=scope,
                                              mode=Mode.parse(asked["mode"] or Mode.HYBRID.value))
        except ApplicationError as exc:
            context["error"] = exc.message
    return TemplateResponse(request, "admin/sources/try_search.html", context)
