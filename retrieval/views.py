from django.conf import settings
from django.shortcuts import render

from rag_site.errors import ApplicationError
from retrieval.search import chunks_search
from sources.models import IndexStatus, Skill


def search_page(request):
    """The search page; HTMX requests get only the #results partial."""
    query = request.GET.get("q", "").strip()[:2000]
    context = {"query": query, "hits": [], "error": ""}
    if query:
        try:
            context["hits"] = chunks_search(query=query, k=settings.RAG_SEARCH_DEFAULT_K)
        except ApplicationError as exc:
            context["error"] = exc.message
    else:
        context["indexed"] = Skill.objects.filter(index_status=IndexStatus.INDEXED).count()
        context["pending"] = Skill.objects.exclude(index_status__in=[IndexStatus.INDEXED, IndexStatus.FAILED]).count()
        context["failed"] = Skill.objects.filter(index_status=IndexStatus.FAILED).count()
    template = "retrieval/search.html#results" if request.htmx else "retrieval/search.html"
    return render(request, template, context)
