"""A parsed query run: the one service behind the page, ``/api/v1/search`` and the MCP ``search`` tool.

retrieval/query_language.py says what the text means; this decides what it finds. The query's filters combine
with what the request narrows to (the API's ``sources``, the page's kind, root and language menus): the narrowest
wins, and two that cannot both hold (``kind:document`` with ``sources: ["skill"]``, ``lang:go`` with the page's
Python) are refused with ``InvalidInput`` (422, a message on the page) rather than answered with nothing, so a
caller learns which of its two asks to drop.

Filters a channel's SQL cannot see (exact text, paths, languages, exclusions) are checked on the fused pool
(RAG_SEARCH_CANDIDATES chunks, or ``k`` when more), as the page always did for a language.
"""

from dataclasses import dataclass, field, replace

from access.identity import Identity
from access.scope import Scope
from kernel.errors import InvalidInput
from retrieval.confidence import good_match
from retrieval.config import FilesLimits, SearchConfig
from retrieval.grep import grep_answer
from retrieval.indexing import indexing_warning, sources_indexing_count
from retrieval.kinds import SEARCH_KINDS, kind_problem
from retrieval.query_language import Form, ParsedQuery, text_kept
from retrieval.schemas import GrepIn, GrepOut
from retrieval.search import Hit, Mode, chunks_search
from retrieval.symbols import symbol_hits
from sources.models import Chunk, Source, WorkspaceRoot

FILE = Source.Kind.FILE.value


@dataclass(frozen=True, slots=True)
class Narrowing:
    """What the request itself narrows to, besides its scope's kinds: a root (name or id) and a language."""

    root: str = ""
    language: str = ""
    # Scope fields grep is asked with (the API's bot_id, client_id, channels), so its lines are the search's scope.
    scope_fields: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """``hits`` (search, symbol) or ``grep`` (matching lines); ``more``: the hits may go on past ``k``;
    ``weak``: no good match (retrieval/confidence.py); ``indexing``: sources in scope still being indexed
    (retrieval/indexing.py), also said in ``warnings``."""

    form: Form
    hits: tuple[Hit, ...] = ()
    grep: GrepOut | None = None
    more: bool = False
    weak: bool = False
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    indexing: int = 0


def query_run(
    identity: Identity | None,
    query: ParsedQuery,
    *,
    scope: Scope,
    k: int,
    config: SearchConfig,
    files_limits: FilesLimits | None = None,
    narrowing: Narrowing = Narrowing(),
    mode: Mode = Mode.HYBRID,
    mmr: bool = False,
    mmr_lambda: float | None = None,
    rerank: bool | None = None,
    group: bool = False,
    snippets: int = 0,
    grep_max_matches: int = 50,
    lines: bool = True,
    indexing_counted: bool = True,
) -> QueryResult:
    """What ``query`` finds in ``scope`` (its kinds: what the request asked for), narrowed by ``narrowing``.

    ``files_limits``: grep's (for ``re:`` and a lone ``"exact text"``); left out, built from the settings (tests,
    the shell). ``group`` with ``snippets``: one hit per file with up to that many more of its matching chunks
    (retrieval/search.py); when the query's filters narrow the hits, grouping follows them, without snippets.
    ``lines=False``: ranked chunks only (/context, skills and tools search): a lone ``"exact text"`` finds the
    chunks that hold it, ``re:`` is refused; ``identity`` is then unused (grep's alone). ``indexing_counted=False``:
    the caller counts the sources still being indexed itself, once for several runs (/context, one per kind)."""
    query = _with_request_language(query, narrowing.language)
    kinds = _kinds(query, scope.kinds)
    form = query.form
    if form == Form.GREP and query.regex and not lines:
        raise InvalidInput(
            're: finds lines, and this answers with ranked chunks: search for words (a lone "exact text" finds '
            "the chunks that hold it), or grep with /api/v1/grep or /search",
            details={"field": "query"},
        )
    if form == Form.GREP and not query.regex and (not lines or (kinds and FILE not in kinds)):
        form = Form.SEARCH  # a lone "exact text" in documents or skills: the chunks that hold it (grep reads files)
    warnings: list[str] = []
    source_ids = _root_source_ids(query, narrowing.root, replace(scope, kinds=kinds), warnings)
    if source_ids == ():
        return QueryResult(form=form, warnings=warnings)  # a root one cannot see holds nothing one can find
    narrowed = replace(scope, kinds=kinds, source_ids=source_ids or scope.source_ids)
    indexing = sources_indexing_count(narrowed) if indexing_counted else 0
    if indexing:
        warnings.append(indexing_warning(indexing))
    if form == Form.GREP:
        assert identity is not None, "grep answers for an identity"
        limits = files_limits or FilesLimits.from_settings()
        matched = _grep(identity, query, narrowed, narrowing, kinds, limits, grep_max_matches)
        return QueryResult(form=form, grep=matched, warnings=warnings, indexing=indexing)
    if form == Form.SYMBOL:
        return replace(_symbols(query, narrowed, k=k, config=config, warnings=warnings), indexing=indexing)
    text = query.search_text
    if not text.strip():
        raise InvalidInput(
            'the query has only filters: add words to look for (or sym:NAME, re:PATTERN, "exact text")',
            details={"field": "query"},
        )
    pool = max(k, config.candidates) if query.narrows_hits else k
    found = chunks_search(
        query=text,
        k=pool,
        mode=mode,
        scope=narrowed,
        mmr=mmr,
        mmr_lambda=mmr_lambda,
        rerank=rerank,
        group=group and not query.narrows_hits,
        snippets=snippets if group and not query.narrows_hits else 0,
        config=config,
    )
    kept = [hit for hit in found if _hit_kept(query, hit)]
    if group and query.narrows_hits:
        kept = _best_per_source(kept)  # after the filters: a file's best chunk may lack the exact text another has
    hits = tuple(kept[:k])
    return QueryResult(
        form=form,
        hits=hits,
        more=len(kept) > k or len(found) == pool,
        # Ranks are relative: the first hit of a gibberish query is first all the same (retrieval/confidence.py).
        weak=bool(hits) and not good_match(hits, min_similarity=config.good_match_similarity),
        warnings=[*warnings, *found.warnings],
        timings=found.timings,
        indexing=indexing,
    )


def _with_request_language(query: ParsedQuery, language: str) -> ParsedQuery:
    if not language:
        return query
    language = language.lower()
    if query.languages and language not in query.languages:
        raise InvalidInput(
            f"lang:{' lang:'.join(query.languages)} in the query and the language {language!r} asked for beside it "
            "cannot both hold: drop one",
            details={"field": "query"},
        )
    return replace(query, languages=(language,))


def _kinds(query: ParsedQuery, asked: tuple[str, ...]) -> tuple[str, ...]:
    """The kinds to search: the query's ``kind:`` within the request's; files alone for a language or ``sym:``."""
    wanted = query_kinds(query)
    kinds = tuple(k for k in wanted if not asked or k in asked) if wanted else asked
    if wanted and not kinds:
        raise InvalidInput(
            f"kind:{' kind:'.join(wanted)} in the query and the kinds asked for beside it ({', '.join(asked)}) have "
            "none in common: drop one",
            details={"field": "query"},
        )
    if kinds and FILE not in kinds and (query.symbol or query.roots):
        operator = "sym" if query.symbol else "root"
        raise InvalidInput(
            f"{operator}: narrows to a root's files; {', '.join(kinds)} has none: drop it or search files",
            details={"field": "query"},
        )
    if (query.languages or query.symbol) and not wanted and not asked:
        return (FILE,)  # only a root's files have a language or define names: search nothing else
    return kinds


def query_kinds(query: ParsedQuery) -> tuple[str, ...]:
    """The kinds the query's ``kind:`` filters name (a plural too: ``kind:skills``); 422 for one that is none."""
    for kind in query.kinds:
        problem = kind_problem(kind.removesuffix("s") if kind not in SEARCH_KINDS else kind)
        if problem:
            raise InvalidInput(f"kind:{kind}: {problem}", details={"field": "query"})
    return tuple(k if k in SEARCH_KINDS else k.removesuffix("s") for k in query.kinds)


def _root_source_ids(query: ParsedQuery, asked: str, scope: Scope, warnings: list[str]) -> tuple[int, ...] | None:
    """The visible sources of the roots asked for (the query's ``root:`` names or ids, the request's root, which
    must agree); None when no root is asked for, () when none of them is one the caller can see."""
    if not query.roots and not asked:
        return None
    visible = WorkspaceRoot.objects.filter(
        pk__in=Source.objects.filter(scope.source_filter(), kind=Source.Kind.FILE).values("root_id")
    ).only("pk", "name")
    by_key = {key: root.pk for root in visible for key in (root.name, str(root.pk))}
    wanted = {by_key[name] for name in query.roots if name in by_key}
    for name in query.roots:
        if name not in by_key:
            warnings.append(f"{_typed('root', [name])}: no root of that name that you can see")
    if asked:
        if query.roots and by_key.get(asked) not in wanted:
            raise InvalidInput(
                f"{_typed('root', query.roots)} in the query and the root asked for beside it cannot both hold: "
                "drop one",
                details={"field": "query"},
            )
        wanted = {by_key[asked]} if asked in by_key else set()
    if not wanted:
        return ()
    return tuple(
        Source.objects.filter(scope.source_filter(), root_id__in=wanted).order_by("pk").values_list("pk", flat=True)
    )


def _typed(operator: str, values) -> str:
    """Filters as the query spells them ("root:docs root:api"), for messages."""
    return " ".join(f"{operator}:{value}" for value in values)


def _hit_kept(query: ParsedQuery, hit: Hit, *, words_required: bool = False) -> bool:
    chunk = hit.chunk
    return text_kept(query, text=chunk.content, path=chunk.path, language=chunk.language, words_required=words_required)


def _best_per_source(hits: list[Hit]) -> list[Hit]:
    """The best hit of each source (of each file, for a root's segment: one source of many files), in order."""
    seen: set[tuple[int, str]] = set()
    best = []
    for hit in hits:
        if (hit.chunk.source_id, hit.chunk.path) not in seen:
            seen.add((hit.chunk.source_id, hit.chunk.path))
            best.append(hit)
    return best


def _symbols(query: ParsedQuery, scope: Scope, *, k: int, config: SearchConfig, warnings: list[str]) -> QueryResult:
    """``sym:NAME``: the chunks that define it; other words must then be in their text (``sym:get admin``)."""
    narrows = query.narrows_hits or bool(query.words)
    limit = max(k, config.candidates) if narrows else k
    found = symbol_hits(name=query.symbol, scope=scope, limit=limit + 1)
    kept = [hit for hit in found if _hit_kept(query, hit, words_required=True)]
    return QueryResult(
        form=Form.SYMBOL, hits=tuple(kept[:k]), more=len(kept) > k or len(found) > limit, warnings=warnings
    )


def _grep(
    identity: Identity,
    query: ParsedQuery,
    scope: Scope,
    narrowing: Narrowing,
    kinds: tuple[str, ...],
    limits: FilesLimits,
    max_matches: int,
) -> GrepOut:
    """``re:`` or a lone ``"exact text"``: grep's own answer (retrieval/grep.py), its lines then checked against
    the query's other filters."""
    if kinds and FILE not in kinds:
        raise InvalidInput(
            f"re: finds lines in a root's files; kind:{' kind:'.join(kinds)} has none: add words to search instead",
            details={"field": "query"},
        )
    pattern = query.regex or query.exact[0]
    rest = replace(query, exact=query.exact if query.regex else query.exact[1:])
    roots = _one_root(scope)
    globs = [pattern for pattern in query.paths if any(c in pattern for c in "*?[")]
    found = grep_answer(
        identity,
        GrepIn.model_validate(
            {
                **narrowing.scope_fields,
                "pattern": pattern,
                "regex": bool(query.regex),
                "root": roots,
                # One glob narrows the files grep reads; the lines are checked against every path filter below.
                "glob": globs[0] if len(globs) == 1 and len(query.paths) == 1 else None,
                # One language narrows the files grep reads (its index knows each file's); the lines are checked too.
                "lang": rest.languages[0] if len(rest.languages) == 1 else None,
                "max_matches": max_matches,
            }
        ),
        limits=limits,
    )
    languages = _languages(found, scope) if rest.languages or rest.excluded_languages else {}
    matches = [
        match
        for match in found.matches
        if text_kept(
            rest,
            text=match.text,
            path=match.path,
            language=languages.get((match.root, match.path), ""),
            words_required=True,
        )
    ]
    return found.model_copy(update={"matches": matches})


def _one_root(scope: Scope) -> str | None:
    """The one root grep is asked for (by id), from the scope's sources; None: every root."""
    if not scope.source_ids:
        return None
    roots = set(Source.objects.filter(pk__in=scope.source_ids).values_list("root_id", flat=True))
    if len(roots) > 1:
        raise InvalidInput(
            're: and a lone "exact text" search one root or all: ask for one root:', details={"field": "query"}
        )
    return str(roots.pop())


def _languages(found: GrepOut, scope: Scope) -> dict[tuple[str, str], str]:
    """The language each file with a matching line was indexed as, by (root name, path), in one query."""
    paths = {match.path for match in found.matches}
    rows = (
        Chunk.objects.filter(scope.chunk_filter(), source__kind=Source.Kind.FILE, path__in=paths)
        .values_list("source__root__name", "path", "language")
        .distinct()
    )
    return {(root, path): language for root, path, language in rows}
