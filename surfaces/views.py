"""The team's search page: results as you type (HTMX), filters kept in the URL, "show more" without a reload."""

import dataclasses
import hashlib
import json
import time
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.cache import cache
from django.db.models import Count, Q
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django_htmx.http import HttpResponseClientRedirect

from access.identity import identity_for_user, scope_for
from kernel.errors import ApplicationError
from retrieval.confidence import good_match
from retrieval.config import CitedAnswerConfig, SearchConfig
from retrieval.highlight import highlight_css, matching_words, snippet
from retrieval.search import Hit, Mode, chunks_search, hits_tools
from retrieval.symbols import SYMBOL_NAME, symbol_hits
from sources.models import (
    DESCRIPTION_KEY,
    Chunk,
    IndexedFile,
    IndexStatus,
    Skill,
    Source,
    Tool,
    UploadedDocument,
    WorkspaceRoot,
)
from sources.roots import root_sources
from surfaces.code_search import grep_results, query_form

PAGE_SIZE = 10
KINDS = (
    ("", "Everything"),
    (Source.Kind.SKILL, "Skills"),
    (Source.Kind.FILE, "Files"),
    (Source.Kind.DOCUMENT, "Uploaded documents"),
    (Source.Kind.TOOL, "Tools"),
    (Source.Kind.MEMORY, "Memories"),
)
MODES = (("hybrid", "Hybrid"), ("lexical", "Words"), ("vector", "Meaning"))


@dataclasses.dataclass(frozen=True, slots=True)
class Filters:
    """What the page's form asks for; every field lives in the URL, so a search can be shared."""

    query: str = ""
    kind: str = ""
    root: str = ""  # a root's id
    language: str = ""
    mode: str = "hybrid"
    page: int = 1

    @classmethod
    def from_request(cls, request) -> "Filters":
        get = request.GET
        kind = get.get("kind", "")
        mode = get.get("mode", "hybrid")
        try:
            page = min(max(int(get.get("page", "1")), 1), settings.RAG_SEARCH_MAX_K // PAGE_SIZE)
        except ValueError:
            page = 1
        return cls(
            query=get.get("q", "").strip()[:2000],
            kind=kind if kind in dict(KINDS) else "",
            root=get.get("root", "") if get.get("root", "").isdigit() else "",
            language=get.get("language", "")[:32],
            mode=mode if mode in dict(MODES) else "hybrid",
            page=page,
        )

    def url(self, **changes) -> str:
        """The page's URL for these filters (with ``changes``), without the defaults."""
        values = dataclasses.asdict(dataclasses.replace(self, **changes))
        names = {"query": "q"}
        defaults = dataclasses.asdict(Filters())
        pairs = [(names.get(k, k), v) for k, v in values.items() if v != defaults[k]]
        return reverse("search") + ("?" + urlencode(pairs) if pairs else "")


def search_page(request):
    """The search page, for signed-in people; HTMX requests get only the part they replace."""
    if not request.user.is_authenticated:
        login = redirect_to_login(request.get_full_path())
        # An HTMX swap would follow a redirect and put the login page inside #results.
        return HttpResponseClientRedirect(login.url) if request.htmx else login
    filters = Filters.from_request(request)
    identity = identity_for_user(request.user)
    scope = scope_for(identity)
    context = {
        "filters": filters,
        "kinds": KINDS,
        "modes": MODES,
        "highlight_css": highlight_css(),
        **_filter_choices(scope),
    }
    if filters.query:
        form = query_form(filters.query)
        if form.kind in ("regex", "exact"):
            root_ids = {root.name: root.pk for root in context["roots"]}
            context["grep"] = grep_results(
                identity, form, root_id=filters.root, root_ids=root_ids, language=filters.language
            )
        elif form.kind == "symbol":
            context.update(_symbol_results(filters, scope, context["roots"], form.text))
        else:
            context.update(_results(filters, scope, context["roots"]))
            context.update(_answer(filters))
            if filters.page == 1 and not filters.kind and SYMBOL_NAME.fullmatch(filters.query):
                # A bare identifier (``F``, ``orm``) is most often a name one wants the definition of.
                context["definitions"] = _symbol_results(filters, scope, context["roots"], filters.query)["hits"][:3]
    else:
        context.update(_landing(scope), examples=_examples(scope))
        context["add_root_url"] = reverse("admin:sources_workspaceroot_add") if _may_add_root(request.user) else ""
    more = request.htmx and request.GET.get("more") == "1"
    template = (
        "retrieval/search.html#more"
        if more
        else "retrieval/search.html#results"
        if request.htmx
        else "retrieval/search.html"
    )
    response = render(request, template, context)
    # One URL answers both the page and the fragment: without these, Back (after the viewer, or after a search that
    # pushed this URL) got the fragment from the browser's cache and showed it alone, unstyled, with no search box.
    patch_vary_headers(response, ("HX-Request",))
    if request.htmx:
        add_never_cache_headers(response)
    return response


_NO_HITS = {"hits": [], "total": 0, "more": False, "more_url": "", "elapsed_ms": 0, "warnings": []}


def _narrowed(filters: Filters, scope, roots: list[WorkspaceRoot]):
    kind = (Source.Kind.FILE,) if filters.language else (filters.kind,) if filters.kind else scope.kinds
    return dataclasses.replace(
        scope, kinds=kind, source_ids=_root_source_ids(roots, filters.root, scope) if filters.root else scope.source_ids
    )


def _symbol_results(filters: Filters, scope, roots: list[WorkspaceRoot], name: str) -> dict:
    """``sym:NAME``: the code chunks that define ``name``, in the person's scope and the page's root filter."""
    narrowed = _narrowed(filters, scope, roots)
    if filters.root and not narrowed.source_ids:
        return _NO_HITS
    started = time.perf_counter()
    hits = symbol_hits(name=name, scope=narrowed, limit=PAGE_SIZE)
    if filters.language:
        hits = [hit for hit in hits if hit.chunk.language == filters.language]
    words = matching_words(name, [hit.chunk.content for hit in hits])
    return {
        **_NO_HITS,
        "hits": _hit_views(hits, words, roots, first_rank=1),
        "total": len(hits),
        "elapsed_ms": round((time.perf_counter() - started) * 1000),
    }


def _results(filters: Filters, scope, roots: list[WorkspaceRoot]) -> dict:
    narrowed = _narrowed(filters, scope, roots)
    if filters.root and not narrowed.source_ids:
        return _NO_HITS
    k = filters.page * PAGE_SIZE
    config = SearchConfig.from_settings()
    started = time.perf_counter()
    try:
        # A language narrows the fused pool (RAG_SEARCH_CANDIDATES chunks): languages are not in the indexes.
        found = chunks_search(
            query=filters.query,
            k=max(k, config.candidates) if filters.language else k,
            mode=Mode.parse(filters.mode),
            scope=narrowed,
            config=config,
        )
    except ApplicationError as exc:
        return {"error": exc.message}
    hits = [hit for hit in found if hit.chunk.language == filters.language] if filters.language else list(found)
    shown = hits[(filters.page - 1) * PAGE_SIZE : k]
    words = matching_words(filters.query, [hit.chunk.content for hit in shown])
    elapsed_ms = round((time.perf_counter() - started) * 1000)
    more = len(hits) > k or (len(found) == k and k < settings.RAG_SEARCH_MAX_K)
    return {
        # Ranks are relative: the first hit of a gibberish query is first all the same (retrieval/confidence.py).
        "weak": bool(hits) and not good_match(hits, min_similarity=settings.RAG_SEARCH_GOOD_MATCH_SIMILARITY),
        "hits": _hit_views(shown, words, roots, first_rank=(filters.page - 1) * PAGE_SIZE + 1),
        "total": min(len(hits), k),
        "more": more,
        "more_url": filters.url(page=filters.page + 1) + "&more=1" if more else "",
        "elapsed_ms": elapsed_ms,
        "warnings": found.warnings,
    }


def _hit_views(shown: list[Hit], words: set[str], roots: list[WorkspaceRoot], *, first_rank: int) -> list[dict]:
    """The page's view of ``shown``, numbered from ``first_rank``, with what they link to read in one query each."""
    slugs = dict(
        Skill.objects.filter(
            source_id__in={hit.chunk.source_id for hit in shown if hit.chunk.source.kind == Source.Kind.SKILL}
        ).values_list("source_id", "slug")
    )
    uploaded = dict(
        UploadedDocument.objects.filter(
            source_id__in={hit.chunk.source_id for hit in shown if hit.chunk.source.kind == Source.Kind.DOCUMENT}
        ).values_list("source_id", "pk")
    )
    schemas = {source_id: json.dumps(tool.openai_schema, indent=2) for source_id, tool in hits_tools(shown).items()}
    # Two roots may both hold README.md: a file hit names its root when the person sees more than one.
    root_names = {root.pk: root.name for root in roots} if len(roots) > 1 else {}
    links = Links(slugs, uploaded, schemas, root_names)
    return [_hit_view(hit, rank, words, links) for rank, hit in enumerate(shown, start=first_rank)]


def _answer(filters: Filters) -> dict:
    """What the answer box above the results needs: whether answers are on, and the kinds the filters ask for
    (an answer cites skills and files; a root or language filter is not one /context knows)."""
    kinds: dict[str, list[str]] = {
        Source.Kind.SKILL: ["skill"],
        Source.Kind.FILE: ["file"],
        Source.Kind.DOCUMENT: ["file"],
    }
    return {
        "answers_enabled": CitedAnswerConfig.from_settings().enabled,
        "answer_sources": kinds.get(filters.kind, ["file"] if filters.language else []),
    }


@dataclasses.dataclass(frozen=True)
class Links:
    """What the page's hits point to, read for the whole page at once: each skill source's slug, each uploaded
    document's id, each tool's schema (pretty JSON) and each root's name (only when several roots are visible)."""

    slugs: dict[int, str]
    uploaded: dict[int, int]
    schemas: dict[int, str]
    root_names: dict[int, str]


def _trail(prefix: str, title: str) -> str:
    """A chunk's section path as the page shows it: headings without their ``#`` marks, and without a first heading
    that only repeats the hit's title (a skill's title is usually its top heading)."""
    parts = [part.lstrip("#").strip() for part in prefix.split(" > ")] if prefix else []
    if parts and parts[0].casefold() == title.casefold():
        parts = parts[1:]
    return " › ".join(part for part in parts if part)


def _hit_view(hit: Hit, rank: int, words: set[str], links: Links) -> dict:
    """One hit as the page shows it."""
    slugs, uploaded = links.slugs, links.uploaded
    chunk, source = hit.chunk, hit.chunk.source
    shown = snippet(content=chunk.content, kind=source.kind, path=chunk.path, first_line=chunk.start_line, words=words)
    anchor = f"#L{chunk.start_line}-L{chunk.end_line}"
    if source.kind == Source.Kind.SKILL and source.pk in slugs:
        url = reverse("view-skill", args=[slugs[source.pk]]) + anchor
    elif source.kind == Source.Kind.FILE and source.root_id is not None:
        url = reverse("view-file", args=[source.root_id, chunk.path]) + anchor
    elif source.kind == Source.Kind.DOCUMENT and source.pk in uploaded:
        url = reverse("view-document", args=[uploaded[source.pk]]) + anchor
    else:
        url = ""  # a tool is its schema, an evaluation document has no file: nothing more to open
    return {
        "hit": hit,
        "rank": rank,
        "kind": source.kind,
        "snippet": shown,
        "url": url,
        "description": (chunk.metadata or {}).get(DESCRIPTION_KEY, ""),
        "trail": _trail(chunk.context_prefix, hit.title),
        "schema": links.schemas.get(source.pk, ""),
        "root_name": links.root_names.get(source.root_id, "") if source.root_id is not None else "",
    }


def _root_source_ids(roots: list[WorkspaceRoot], root_id: str, scope) -> tuple[int, ...]:
    """The visible sources of root ``root_id`` (one of ``roots``, those the person can filter by); none otherwise."""
    root = next((root for root in roots if str(root.pk) == root_id), None)
    if root is None:
        return ()
    return tuple(root_sources(root).filter(pk__in=scope.source_ids_sql()).values_list("pk", flat=True))


def _filter_choices(scope) -> dict:
    """The roots and languages the person can filter by: only what their scope can see."""
    sources = Source.objects.filter(scope.source_filter(), kind=Source.Kind.FILE)
    roots = list(WorkspaceRoot.objects.filter(pk__in=sources.values("root_id")).order_by("name").only("pk", "name"))
    return {"roots": roots, "languages": _languages(scope)}


def _languages(scope) -> list[str]:
    """The languages of the files this scope sees; a scan of their chunks, so kept a minute per scope."""
    key = "search-languages:" + hashlib.sha256(repr(scope).encode()).hexdigest()
    languages = cache.get(key)
    if languages is None:
        languages = sorted(
            Chunk.objects.filter(scope.chunk_filter(), source__kind=Source.Kind.FILE)
            .exclude(language="")
            .values_list("language", flat=True)
            .distinct()
        )
        cache.set(key, languages, timeout=60)
    return languages


def _landing(scope) -> dict:
    """What the empty page says: how much of each kind is searchable, what waits, what failed."""
    skills = Skill.objects.filter(source__in=scope.source_ids_sql(enabled_only=False))
    states = skills.aggregate(
        indexed=Count("pk", filter=Q(index_status=IndexStatus.INDEXED)),
        failed=Count("pk", filter=Q(index_status=IndexStatus.FAILED)),
        pending=Count("pk", filter=~Q(index_status__in=[IndexStatus.INDEXED, IndexStatus.FAILED])),
    )
    files = IndexedFile.objects.filter(source__in=scope.source_ids_sql(), source__kind=Source.Kind.FILE)
    tools = Tool.objects.filter(source__in=scope.source_ids_sql(), index_status=IndexStatus.INDEXED)
    uploaded = UploadedDocument.objects.filter(source__in=scope.source_ids_sql(), index_status=IndexStatus.INDEXED)
    return {**states, "files": files.count(), "documents": uploaded.count(), "tools": tools.count()}


EXAMPLES = 4


def _examples(scope) -> list[str]:
    """First searches to offer on the empty page: section headings of the skills in scope, so each finds something."""
    headings = (
        Chunk.objects.filter(source__in=scope.source_ids_sql(), source__kind=Source.Kind.SKILL)
        .filter(metadata__has_key="heading")
        .order_by("source_id", "chunk_index")
        .values_list("metadata__heading", "source__skill__title")[: EXAMPLES * 10]
    )
    examples: list[str] = []
    for heading, title in headings:
        text = str(heading).lstrip("#").strip()
        if text and text != title and text not in examples:  # the title alone is too broad a first search
            examples.append(text)
    return examples[:EXAMPLES]


def _may_add_root(user) -> bool:
    return user.is_staff and user.has_perm("sources.add_workspaceroot")
