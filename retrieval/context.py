"""LLM-ready context: search each kind of source, load what the parts need, assemble within a token budget.

The searches are the ordinary hybrid search (retrieval/search.py), one per
kind so skills, files and tools each get their own ``k`` and one noisy kind
cannot crowd out the others. Assembly itself is pure (retrieval/assembly.py).
"""

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from access.identity import Identity, scope_for
from access.scope import Scope
from retrieval.assembly import Assembled, Dropped, Part, SkillEntry, Span, assemble, spans_merge
from retrieval.config import ContextConfig, SearchConfig
from retrieval.files import file_lines, files_stat, files_text
from retrieval.indexing import indexing_warning, sources_indexing_count
from retrieval.query_language import ParsedQuery, query_parse
from retrieval.querying import query_kinds, query_run
from retrieval.schemas import ContextIn, ContextOut, ContextPartOut, DroppedOut
from retrieval.search import Hit, hits_tools
from retrieval.tokens import token_count
from sources.extract import extractor_for
from sources.git_roots import permalink
from sources.models import COMMIT_KEY, IndexedFile, IndexStatus, Skill, Source, WorkspaceRoot

# Kinds a caller may ask for, in the order their searches run.
KINDS = (Source.Kind.SKILL, Source.Kind.FILE, Source.Kind.TOOL, Source.Kind.MEMORY)
# The sources each kind searches: an uploaded document is evidence cited by its lines like a root's file, so "file"
# (its k, its place in ``sources``) covers both; a caller has no second knob to learn.
_SEARCHED: dict[str, tuple[str, ...]] = {Source.Kind.FILE: (Source.Kind.FILE, Source.Kind.DOCUMENT)}
_WORD = re.compile(r"[A-Za-z0-9_]{3,}")
# A skill's matching chunks its entry chooses its section from: its best and the next ones of the same skill.
SKILL_SECTIONS = 3


@dataclass(frozen=True, slots=True)
class Context:
    assembled: Assembled
    tools: list[dict] = field(default_factory=list)  # OpenAI function schemas, best first
    warnings: list[str] = field(default_factory=list)


def context_build(*, query: str, budget: int, scope: Scope, k: dict[str, int], config: ContextConfig) -> Context:
    """The context for ``query`` (the query language, retrieval/query_language.py): ``k[kind]`` hits of each kind
    in ``scope`` (0: none), cut to ``budget`` tokens counted in ``config.tokenizer``.

    Kinds: skill (an index entry each), file, dataset and memory (evidence
    spans), tool (schemas, outside the text).
    """
    parsed = query_parse(query)
    hits, warnings = context_search(query=parsed, scope=scope, k=k, config=config.search)
    return context_assemble(hits, query=parsed.search_text, budget=budget, config=config, warnings=warnings)


def context_search(
    *, query: ParsedQuery, scope: Scope, k: dict[str, int], config: SearchConfig
) -> tuple[dict[str, list[Hit]], list[str]]:
    """One search per kind (its own ``k``), and their warnings. The query's filters hold in each (the search page's
    and /search's rules, retrieval/querying.py); ``kind:`` picks the kinds searched, and ``sym:``, ``root:`` and
    ``lang:``, which only a root's files have, leave the other kinds out."""
    wanted = query_kinds(query)
    files_only = bool(query.symbol or query.roots or query.languages)
    searches = {
        kind: (count, searched)
        for kind, count in k.items()
        if count > 0
        and (searched := tuple(s for s in _SEARCHED.get(kind, (kind,)) if not wanted or s in wanted))
        and not (files_only and kind != Source.Kind.FILE)
    }
    # The sources still being indexed, counted once over every kind searched (each search would count its own).
    searched_kinds = tuple(s for _, kinds in searches.values() for s in kinds)
    indexing = sources_indexing_count(replace(scope, kinds=searched_kinds)) if searched_kinds else 0
    warnings: list[str] = [indexing_warning(indexing)] if indexing else []
    hits: dict[str, list[Hit]] = {}
    for kind, (count, searched) in searches.items():
        found = query_run(
            None,
            query,
            scope=replace(scope, kinds=searched),
            k=count,
            group=kind in (Source.Kind.SKILL, Source.Kind.TOOL, Source.Kind.MEMORY),
            snippets=SKILL_SECTIONS if kind == Source.Kind.SKILL else 0,
            config=config,
            lines=False,
            indexing_counted=False,
        )
        hits[kind] = list(found.hits)
        warnings.extend(w for w in found.warnings if w not in warnings)
    if wanted and not hits:
        asked = ", ".join(kind for kind, count in k.items() if count > 0)
        warnings.append(f"kind:{' kind:'.join(wanted)}: not among the kinds this context searches ({asked})")
    return hits, warnings


def context_assemble(
    hits: dict[str, list[Hit]],
    *,
    query: str,
    budget: int,
    config: ContextConfig,
    warnings: list[str] | None = None,
) -> Context:
    """``context_search``'s hits within ``budget`` tokens of ``config.tokenizer``; hits of any kind not close enough
    in meaning are left out, and said so in ``dropped``."""
    close, far = context_floored(hits, floor=config.min_similarity, margin=config.margin)
    skills, spans = context_pieces(close, query=query)

    def count(text: str) -> int:
        return token_count(text, encoding=config.tokenizer)

    assembled = assemble(skills, spans, budget=budget, count=count, skill_share=config.skill_share)
    if far:
        assembled = replace(assembled, dropped=[*assembled.dropped, *far])
    return Context(assembled=assembled, tools=_tool_schemas(close.get(Source.Kind.TOOL, [])), warnings=warnings or [])


def context_floored(
    hits: dict[str, list[Hit]], *, floor: float, margin: float = 0.0
) -> tuple[dict[str, list[Hit]], list[Dropped]]:
    """The hits of every kind at least ``floor`` close in meaning to the query (RAG_CONTEXT_MIN_SIMILARITY), and the
    others as dropped, with their reason.

    One floor for skills, files, documents, memories and tools: a shared word
    ranks a stylesheet or a skill's unrelated section high in fusion, but only
    closeness in meaning says it answers the question. A skill's other matching
    sections (its snippets) are held to the same floor. With ``margin``, a hit
    under the floor is kept all the same when it is within ``margin`` of the
    closest hit of any kind and that one clears the floor: the query is a real
    one, and code, which a sentence embeds far from, is scored low throughout
    (a query no hit clears the floor for still gets nothing).
    """
    # The closest by meaning: a hit only words found counts as close for the floor, but says nothing of how close
    # the query's evidence is.
    best = max(
        (h.channels["vector"].score for found in hits.values() for h in found if "vector" in h.channels), default=-1.0
    )
    low = min(floor, best - margin) if best >= floor else floor
    close: dict[str, list[Hit]] = {}
    far: list[Dropped] = []
    for kind, found in hits.items():
        kept = []
        for hit in found:
            similarity = _similarity(hit)
            if similarity < low:
                far.append(
                    Dropped(
                        "skill" if kind == Source.Kind.SKILL else hit.chunk.source.kind,
                        hit.citation,
                        hit.score,
                        0,
                        f"below the relevance floor: {similarity:.2f} close in meaning, "
                        f"{low:.2f} needed (RAG_CONTEXT_MIN_SIMILARITY)",
                    )
                )
                continue
            kept.append(replace(hit, snippets=tuple(s for s in hit.snippets if _similarity(s) >= low)))
        close[kind] = kept
    return close, far


def _similarity(hit: Hit) -> float:
    """The cosine of a hit's chunk to the query; a hit only words found (the vector channel did not rank it, or the
    search ran on words alone) counts as fully close: nothing says it is far."""
    vector = hit.channels.get("vector")
    return vector.score if vector is not None else 1.0


def context_pieces(hits: dict[str, list[Hit]], *, query: str) -> tuple[list[SkillEntry], list[Span]]:
    """The skill entries (each with its best section's text) and merged evidence spans of ``context_search``'s
    hits, ready for ``assemble`` (the evaluation assembles them at several budgets, loading them once)."""
    skills = _skill_entries(hits.get(Source.Kind.SKILL, []), query)
    # A memory is evidence like a file's lines, cited memory:<id>:1-n.
    evidence = hits.get(Source.Kind.FILE, []) + hits.get(Source.Kind.DATASET, []) + hits.get(Source.Kind.MEMORY, [])
    spans, indexed = _spans(evidence)
    return skills, spans_merge(spans, gap_lines=_gap_reader(indexed))


def context_for(
    identity: Identity,
    *,
    query: str,
    budget: int,
    kinds: Sequence[str],
    k: dict[str, int],
    config: ContextConfig,
    bot_id: str | None = None,
    client_id: str | None = None,
    channels: list[str] | None = None,
) -> Context:
    """``context_build`` in the caller's scope (the one scope rule), for the kinds asked (empty: all)."""
    scope = scope_for(identity, bot_id=bot_id, client_id=client_id, channels=channels)
    asked = set(kinds or KINDS)
    return context_build(
        query=query,
        budget=budget,
        scope=scope,
        k={kind: k.get(kind, 0) for kind in KINDS if kind in asked},
        config=config,
    )


def _skill_entries(hits: list[Hit], query: str) -> list[SkillEntry]:
    skills = {
        s.source_id: s
        for s in Skill.objects.filter(source_id__in=[h.chunk.source_id for h in hits]).only(
            "source_id", "slug", "indexed_at", "content_hash", "index_status"
        )
    }
    words = {w.lower() for w in _WORD.findall(query)}
    entries = []
    for found in hits:
        skill = skills.get(found.chunk.source_id)
        if skill is None:  # deleted since the search
            continue
        hit = _section(found)
        entries.append(
            SkillEntry(
                slug=skill.slug,
                title=hit.title,
                section=hit.chunk.context_prefix,
                citation=hit.citation,
                why=_why(hit, words),
                score=found.score,
                indexed_at=skill.indexed_at,
                content_hash=skill.content_hash,
                stale=skill.index_status != IndexStatus.INDEXED,  # edited, re-index queued or failed
                content=hit.chunk.content,
                start_line=hit.chunk.start_line,
                end_line=hit.chunk.end_line,
            )
        )
    return entries


def _section(hit: Hit) -> Hit:
    """The chunk a skill shows: its best match, unless that is the skill's opening and another section matched.

    The opening (the text under the title, before the first subheading) says
    what the whole skill is about, so any question on the skill's topic is
    close to it in meaning: "how do I write front matter for a skill" ranked
    the writing-skills intro first and its "Front matter" section next. The
    skill's index line already names the skill; the text shown should answer.
    A section's own opening gives way to a matching subsection the same way.
    """
    matched = (hit, *hit.snippets)
    # The markdown chunker's heading path joins levels with " > " (sources/chunking/markdown.py): the opening's path
    # is empty (text before any heading) or the title's, which the other sections' paths extend.
    paths = [found.chunk.context_prefix for found in matched]

    def opening(path: str) -> bool:
        return not path or any(other.startswith(f"{path} > ") for other in paths)

    return next((found for found in matched if not opening(found.chunk.context_prefix)), hit)


def _why(hit: Hit, words: set[str]) -> str:
    text = f"{hit.chunk.context_prefix}\n{hit.chunk.content}".lower()
    matched = sorted(w for w in words if w in text)
    ranks = ", ".join(f"{name} #{score.rank}" for name, score in sorted(hit.channels.items()))
    said = f"matches {', '.join(matched[:6])}" if matched else "close in meaning"
    return f"{said} ({ranks})" if ranks else said


def _spans(hits: list[Hit]) -> tuple[list[Span], dict[str, IndexedFile]]:
    """Each hit as a span, with its file's index state and whether the file changed since (size, mtime);
    and the index state of each document."""
    if not hits:
        return [], {}
    states = _file_states(hits)
    current = _files_now(hits)
    roots = {
        pk: (name, template)
        for pk, name, template in WorkspaceRoot.objects.filter(
            pk__in={h.chunk.source.root_id for h in hits}
        ).values_list("pk", "name", "git_permalink")
    }
    spans, indexed = [], {}
    for hit in hits:
        chunk = hit.chunk
        document = f"{chunk.source_id}:{chunk.path}"
        state = states.get((chunk.source_id, chunk.path))
        if state is not None:
            indexed[document] = state
        root_id = chunk.source.root_id
        # A root's file without its index row (caught mid-update) counts as changed: nothing vouches for it.
        stale = root_id is not None and (
            state is None or current.get((chunk.source_id, chunk.path)) != (state.size, state.mtime_ns)
        )
        spans.append(
            Span(
                document=document,
                path=chunk.path or chunk.source.key,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                content=chunk.content,
                score=hit.score,
                kind=chunk.source.kind,
                root_id=root_id,
                root=roots.get(root_id, ("", ""))[0] if root_id is not None else "",
                commit=chunk.metadata.get(COMMIT_KEY, ""),
                permalink_template=roots.get(root_id, ("", ""))[1] if root_id is not None else "",
                language=chunk.language,
                symbol=chunk.symbol,
                anchor=chunk.metadata.get("anchor", ""),
                chunk_ids=(chunk.pk,),
                indexed_at=state.indexed_at if state else None,
                content_hash=state.content_hash if state else chunk.content_hash,
                stale=stale,
            )
        )
    return spans, indexed


def _gap_reader(indexed: dict[str, IndexedFile]):
    """Lines between two cited ranges of a file, from the file as it is; None unless it is still the file indexed
    (size and mtime when read, and the bytes read, as recorded)."""
    files: dict[str, list[str] | None] = {}

    def gap_lines(span: Span, first: int, last: int) -> list[str] | None:
        state = indexed.get(span.document)
        if span.kind != Source.Kind.FILE or span.stale or span.root_id is None or state is None:
            return None
        if extractor_for(span.path) is not None:
            # A document's cited lines are lines of its extracted text; the file on disk has others there.
            return None
        if span.document not in files:
            current = files_text(root_id=span.root_id, paths=[span.path])[span.path]
            unchanged = (
                current is not None
                and (current.size, current.mtime_ns) == (state.size, state.mtime_ns)
                and len(current.text.encode()) == state.size
            )
            files[span.document] = file_lines(current.text) if current is not None and unchanged else None
        lines = files[span.document]
        return lines[first - 1 : last] if lines is not None and last <= len(lines) else None

    return gap_lines


def _file_states(hits: list[Hit]) -> dict[tuple[int, str], IndexedFile]:
    # One query: the active generation's row of every file hit.
    wanted = {(h.chunk.source_id, h.chunk.path, h.chunk.source.active_generation) for h in hits}
    rows = IndexedFile.objects.filter(source_id__in={w[0] for w in wanted}, path__in={w[1] for w in wanted})
    return {(row.source_id, row.path): row for row in rows if (row.source_id, row.path, row.generation) in wanted}


def _files_now(hits: list[Hit]) -> dict[tuple[int, str], tuple[int, int] | None]:
    """(size, mtime_ns) on disk now of each file hit, read safely below its root; evaluation documents have none."""
    by_root: dict[int, set[tuple[int, str]]] = {}
    for hit in hits:
        root_id = hit.chunk.source.root_id
        if root_id is not None:
            by_root.setdefault(root_id, set()).add((hit.chunk.source_id, hit.chunk.path))
    now: dict[tuple[int, str], tuple[int, int] | None] = {}
    for root_id, files in by_root.items():
        stats = files_stat(root_id=root_id, paths=sorted({path for _, path in files}))
        now.update({(source_id, path): stats.get(path) for source_id, path in files})
    return now


def _tool_schemas(hits: list[Hit]) -> list[dict]:
    tools = hits_tools(hits)
    return [tools[h.chunk.source_id].openai_schema for h in hits if h.chunk.source_id in tools]


def context_answer(identity: Identity, payload: ContextIn, *, config: ContextConfig) -> ContextOut:
    """``POST /api/v1/context`` and the MCP tool get_context: the request in, the schema out."""
    k = payload.k.model_dump() | ({} if payload.include_tools else {"tool": 0})
    context = context_for(
        identity,
        query=payload.query,
        budget=payload.budget_tokens,
        kinds=payload.sources,
        k=k,
        config=config,
        bot_id=payload.bot_id,
        client_id=payload.client_id,
        channels=payload.channels,
    )
    assembled = context.assembled
    return ContextOut(
        query=payload.query,
        tokenizer=config.tokenizer,
        budget_tokens=payload.budget_tokens,
        tokens_used=assembled.tokens_used,
        text=assembled.text if payload.format == "markdown" else "",
        parts=[_part_out(part) for part in assembled.parts],
        tools=context.tools,
        tools_tokens=token_count(json.dumps(context.tools), encoding=config.tokenizer) if context.tools else 0,
        dropped=[
            DroppedOut(kind=d.kind, citation=d.citation, score=d.score, tokens=d.tokens, reason=d.reason)
            for d in assembled.dropped
        ],
        warnings=context.warnings,
    )


def _part_out(part: Part) -> ContextPartOut:
    item = part.item
    common: dict[str, Any] = {
        "kind": part.kind,
        "citation": part.citation,
        "score": part.score,
        "tokens": part.tokens,
        "content": part.content,
        "indexed_at": item.indexed_at,
        "content_hash": item.content_hash,
        "stale": item.stale,
    }
    if isinstance(item, SkillEntry):
        return ContextPartOut(**common, title=item.title, slug=item.slug, section=item.section, why=item.why)
    return ContextPartOut(
        **common,
        root=item.root,
        path=item.path,
        start_line=item.start_line,
        end_line=item.end_line,
        language=item.language,
        symbol=item.symbol,
        compacted=item.omitted is not None,
        omitted_lines=list(item.omitted) if item.omitted else None,
        commit=item.commit,
        permalink=permalink(
            item.permalink_template, commit=item.commit, path=item.path, start=item.start_line, end=item.end_line
        ),
    )
