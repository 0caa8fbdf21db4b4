"""The team's search page: results as you type (HTMX), filters kept in the URL, "show more" without a reload."""

import dataclasses
import hashlib
import json
import time
from pathlib import PurePosixPath
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
from kernel.errors import ApplicationError, InvalidInput
from retrieval.config import CitedAnswerConfig, FilesLimits, SearchConfig
from retrieval.highlight import highlight_css, matching_words, snippet
from retrieval.kinds import SEARCH_KINDS
from retrieval.query_language import Form, ParsedQuery, query_parse
from retrieval.querying import Narrowing, query_run
from retrieval.search import FILE_SNIPPETS, Hit, Mode, hits_tools
from retrieval.symbols import SYMBOL_NAME
from sources.models import (
    COMMIT_KEY,
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
from surfaces.code_search import GREP_MAX_MATCHES, grep_view

PAGE_SIZE = 10
KINDS = (("", "Everything"), *SEARCH_KINDS.items())
MODES = (("hybrid", "Hybrid"), ("lexical", "Words"), ("vector", "Meaning"))
# One card per file by default, as code search tools show results: a file's several matching chunks are one result
# with its best places under it, not several cards that each repeat its root and path.
GROUPS = (("file", "One per file"), ("chunk", "Every chunk"))
# A grouped card's lines: its best chunk's, then each further chunk's, from the first matching line (five cards fit
# a 1280x800 screen with the answer box: tests/surfaces/test_grouped_results_browser.py).
CARD_LINES = (2, 1)


@dataclasses.dataclass(frozen=True, slots=True)
class Filters:
    """What the page's form asks for; every field lives in the URL, so a search can be shared."""

    query: str = ""
    kind: str = ""
    root: str = ""  # a root's id
    language: str = ""
    mode: str = "hybrid"
    group: str = "file"
    page: int = 1

    @classmethod
    def from_request(cls, request) -> "Filters":
        get = request.GET
        kind = get.get("kind", "")
        mode = get.get("mode", "hybrid")
        group = get.get("group", "file")
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
            group=group if group in dict(GROUPS) else "file",
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
        "groups": GROUPS,
        "highlight_css": highlight_css(),
        **_filter_choices(scope),
    }
    if filters.query:
        context.update(_query_results(identity, filters, scope, context["roots"]))
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


def _query_results(identity, filters: Filters, scope, roots: list[WorkspaceRoot]) -> dict:
    """What the query finds, as the page shows it: the engine parses and runs it (retrieval/querying.py, the API's
    own), with the menus' kind, root and language beside the query's filters."""
    k = filters.page * PAGE_SIZE  # grouped, files
    grouped = filters.group == "file"
    started = time.perf_counter()
    try:
        query = query_parse(filters.query)
        found = query_run(
            identity,
            query,
            scope=dataclasses.replace(scope, kinds=(filters.kind,)) if filters.kind else scope,
            k=k,
            mode=Mode.parse(filters.mode),
            config=SearchConfig.from_settings(),
            files_limits=FilesLimits.from_settings(),
            narrowing=Narrowing(root=filters.root, language=filters.language),
            grep_max_matches=GREP_MAX_MATCHES,
            group=grouped,
            snippets=FILE_SNIPPETS if grouped else 0,
        )
    except InvalidInput as exc:  # the query's own mistake (a kind that does not exist, an invalid regex): say it
        return {"query_error": exc.message}
    except ApplicationError as exc:
        return {"error": exc.message}
    except ValueError as exc:  # grep's schema checks (length, control characters)
        return {"query_error": str(exc).splitlines()[-1]}
    if found.grep is not None:
        return {
            "grep": grep_view(found.grep, query, root_ids={root.name: root.pk for root in roots}),
            "warnings": found.warnings,
            "indexing": found.indexing,
        }
    shown = list(found.hits[(filters.page - 1) * PAGE_SIZE : k])
    words = matching_words(
        query.symbol or query.search_text, [h.chunk.content for hit in shown for h in (hit, *hit.snippets)]
    )
    more = found.more and k < settings.RAG_SEARCH_MAX_K
    results = {
        "weak": found.weak,
        "hits": _hit_views(shown, words, roots, first_rank=(filters.page - 1) * PAGE_SIZE + 1, grouped=grouped),
        "total": len(found.hits),
        "more": more,
        "more_url": filters.url(page=filters.page + 1) + "&more=1" if more else "",
        "elapsed_ms": round((time.perf_counter() - started) * 1000),
        "warnings": found.warnings,
        "indexing": found.indexing,
    }
    if found.form == Form.SEARCH:
        results.update(_answer(filters))
        if filters.page == 1 and not filters.kind and SYMBOL_NAME.fullmatch(filters.query):
            # A bare identifier (``F``, ``orm``) is most often a name one wants the definition of.
            results["definitions"] = _definitions(identity, filters, scope, roots)
    return results


DEFINITIONS = 3  # names shown above a bare identifier's results; "all definitions" links to sym:NAME


def _definitions(identity, filters: Filters, scope, roots: list[WorkspaceRoot]) -> list[dict]:
    name = filters.query
    found = query_run(
        identity,
        ParsedQuery(text=f"sym:{name}", symbol=name),
        scope=scope,
        k=DEFINITIONS,
        config=SearchConfig.from_settings(),
        narrowing=Narrowing(root=filters.root, language=filters.language),
    )
    # A long definition is several chunks of the same name in the same file: it is listed once.
    seen: set[tuple[int, str, str]] = set()
    hits = []
    for hit in found.hits:
        key = (hit.chunk.source_id, hit.chunk.path, hit.chunk.symbol)
        if key not in seen:
            seen.add(key)
            hits.append(hit)
    words = matching_words(name, [hit.chunk.content for hit in hits])
    return _hit_views(hits, words, roots, first_rank=1)


def _hit_views(
    shown: list[Hit], words: set[str], roots: list[WorkspaceRoot], *, first_rank: int, grouped: bool = False
) -> list[dict]:
    """The page's view of ``shown``, numbered from ``first_rank``, with what they link to read in one query each;
    ``grouped``: each a file's card, its best chunk and its snippets in a few lines each."""
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
    return [_hit_view(hit, rank, words, links, grouped=grouped) for rank, hit in enumerate(shown, start=first_rank)]


def _answer(filters: Filters) -> dict:
    """What the answer box above the results needs: whether answers are on, and the kinds the filters ask for
    (an answer cites skills and files; a root or language filter is not one /context knows)."""
    kinds: dict[str, list[str]] = {
        Source.Kind.SKILL: ["skill"],
        Source.Kind.FILE: ["file"],
        Source.Kind.DOCUMENT: ["file"],
    }
    return {
        "answer_box": True,  # sym:, re: and "exact text" find definitions and lines: no answer box, not "off"
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


def _trail(prefix: str, title: str, *, shown: tuple[str, ...] = ()) -> str:
    """A chunk's section path as the page shows it: headings without their ``#`` marks, and without a first heading
    that only repeats the hit's title (a skill's title is usually its top heading), nor what the hit shows elsewhere
    (``shown``: a document's file name, its page)."""
    parts = [part.lstrip("#").strip() for part in prefix.split(" > ")] if prefix else []
    if parts and parts[0].casefold() == title.casefold():
        parts = parts[1:]
    return " › ".join(part for part in parts if part and part not in shown)


def _hit_view(hit: Hit, rank: int, words: set[str], links: Links, *, grouped: bool = False) -> dict:
    """One hit as the page shows it; grouped, with ``parts``: the best chunk and each snippet, a few lines each."""
    chunk, source = hit.chunk, hit.chunk.source
    metadata = chunk.metadata or {}
    anchor = metadata.get("anchor", "")
    shown = snippet(content=chunk.content, kind=source.kind, path=chunk.path, first_line=chunk.start_line, words=words)
    url = _chunk_url(chunk, links)
    parts = [
        {
            "snippet": snippet(
                content=part.content,
                kind=source.kind,
                path=part.path,
                first_line=part.start_line,
                words=words,
                window_lines=CARD_LINES[min(n, 1)],
            ),
            "url": _chunk_url(part, links),
            "chunk": part,
            **_where(part),
        }
        for n, part in enumerate((chunk, *(more.chunk for more in hit.snippets)))
    ]
    return {
        "hit": hit,
        "rank": rank,
        "kind": source.kind,
        "snippet": shown,
        "url": url,
        "description": metadata.get(DESCRIPTION_KEY, ""),
        # A document's chunk is named by its page ("p. 2"), which the trail holds too: shown once, in the trail, or
        # (grouped) beside each part's lines; its file name is the card's title already.
        "symbol": "" if chunk.symbol == anchor else chunk.symbol,
        "trail": _trail(
            chunk.context_prefix,
            hit.title,
            shown=(PurePosixPath(chunk.path).name, *([anchor] if grouped else [])) if anchor else (),
        ),
        # A git root's chunk carries the commit it was read at, as the viewer says it.
        "commit": str(metadata.get(COMMIT_KEY, ""))[:12],
        "schema": links.schemas.get(source.pk, ""),
        "root_name": links.root_names.get(source.root_id, "") if source.root_id is not None else "",
        "parts": parts if grouped else [],
    }


def _where(chunk: Chunk) -> dict[str, str]:
    """A card part's range as shown beside its lines (``where``: a document's page first) and what only a screen
    reader says before it (``unseen``: the path the card names once above, or "Lines"): together its citation."""
    anchor = (chunk.metadata or {}).get("anchor", "")
    if not anchor:
        return {"unseen": "Lines ", "where": f"{chunk.start_line}-{chunk.end_line}"}
    where = f"{anchor} (lines {chunk.start_line}-{chunk.end_line})"
    return {"unseen": chunk.citation.removesuffix(where), "where": where}


def _chunk_url(chunk: Chunk, links: Links) -> str:
    """Where the viewer shows ``chunk``'s lines; empty for a tool (its schema) or an evaluation document (no file)."""
    source = chunk.source
    anchor = f"#L{chunk.start_line}-L{chunk.end_line}"
    if source.kind == Source.Kind.SKILL and source.pk in links.slugs:
        return reverse("view-skill", args=[links.slugs[source.pk]]) + anchor
    if source.kind == Source.Kind.FILE and source.root_id is not None:
        return reverse("view-file", args=[source.root_id, chunk.path]) + anchor
    if source.kind == Source.Kind.DOCUMENT and source.pk in links.uploaded:
        return reverse("view-document", args=[links.uploaded[source.pk]]) + anchor
    return ""


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
