from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render
from django_htmx.http import HttpResponseClientRedirect

from rag_site.errors import ApplicationError
from retrieval.access import identity_for_user, scope_for
from retrieval.search import chunks_search
from sources.models import IndexStatus, Skill


def search_page(request):
    """The search page, for signed-in people; HTMX requests get only the #results partial."""
    if not request.user.is_authenticated:
        login = redirect_to_login(request.get_full_path())
        # An HTMX swap would follow a redirect and put the login page inside #results.
        return HttpResponseClientRedirect(login.url) if request.htmx else login
    scope = scope_for(identity_for_user(request.user))
    query = request.GET.get("q", "").strip()[:2000]
    context = {"query": query, "hits": [], "error": ""}
    if query:
        try:
            context["hits"] = chunks_search(query=query, k=settings.RAG_SEARCH_DEFAULT_K, scope=scope)
        except ApplicationError as exc:
            context["error"] = exc.message
    else:
        skills = Skill.objects.filter(source__in=scope.source_ids_sql(enabled_only=False))
        context["indexed"] = skills.filter(index_status=IndexStatus.INDEXED).count()
        context["pending"] = skills.exclude(index_status__in=[IndexStatus.INDEXED, IndexStatus.FAILED]).count()
        context["failed"] = skills.filter(index_status=IndexStatus.FAILED).count()
    template = "retrieval/search.html#results" if request.htmx else "retrieval/search.html"
    return render(request, template, context)
