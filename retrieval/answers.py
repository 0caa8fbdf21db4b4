"""What the search endpoints answer, shared by the HTTP API (surfaces/routes/retrieval.py) and MCP (surfaces/mcp.py).

Each function takes the caller's identity and the validated request schema
and returns the response schema; the routers only add HTTP (status, headers).
Context, read and grep answer from retrieval/context.py and retrieval/files.py.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from access.identity import Identity, scope_for
from access.scope import Scope
from retrieval.chunk_ids import chunk_public_id
from retrieval.config import AnswerConfig, SearchConfig
from retrieval.query_language import query_parse
from retrieval.querying import Narrowing, query_run
from retrieval.schemas import (
    GREP_MATCHES_CAP,
    ChannelOut,
    HitOut,
    ScopeIn,
    SearchIn,
    SearchOut,
    SkillHitOut,
    SkillSearchIn,
    SkillSearchOut,
    SnippetOut,
    ToolHitOut,
    ToolSearchIn,
    ToolSearchOut,
)
from retrieval.search import FILE_SNIPPETS, ChannelScore, Hit, Mode, hits_tools
from sources.git_roots import permalink
from sources.models import COMMIT_KEY, DESCRIPTION_KEY, Skill, Source, Tool, WorkspaceRoot


def payload_scope(identity: Identity, payload: ScopeIn, *, kinds=()) -> Scope:
    """The caller's scope (from its credentials), narrowed by the payload's bot_id, client_id and channels."""
    return scope_for(
        identity, bot_id=payload.bot_id, client_id=payload.client_id, channels=payload.channels, kinds=kinds
    )


@dataclass(frozen=True, slots=True)
class SearchAnswer:
    out: SearchOut
    timings: dict[str, float]  # milliseconds per stage, for the Server-Timing header


def search_answer(identity: Identity, payload: SearchIn, *, config: AnswerConfig) -> SearchAnswer:
    """What /search answers (the endpoint and the MCP tool ``search``): the query in the query language
    (retrieval/query_language.py), within the kinds ``sources`` names."""
    scope = payload_scope(identity, payload, kinds=payload.sources)
    found = query_run(
        identity,
        query_parse(payload.query),
        scope=scope,
        k=payload.k,
        mode=Mode.parse(payload.mode),
        mmr=payload.mmr,
        mmr_lambda=payload.mmr_lambda,
        rerank=payload.rerank,
        group=payload.group is not False,
        snippets=FILE_SNIPPETS if payload.group == "file" else 0,
        config=config.search,
        files_limits=config.files,
        narrowing=Narrowing(scope_fields=payload.model_dump(include={"bot_id", "client_id", "channels"})),
        grep_max_matches=min(payload.k, GREP_MATCHES_CAP),  # form grep: k lines
    )
    hits = found.hits
    tools = hits_tools(hits)
    templates = hits_permalink_templates(hits)
    out = SearchOut(
        query=payload.query,
        mode=payload.mode,
        k=payload.k,
        form=found.form.value,
        grep=found.grep,
        no_good_match=found.weak,
        warnings=found.warnings,
        hits=[
            _hit_out(rank, hit, tools, templates, id_secret=config.chunk_id_secret)
            for rank, hit in enumerate(hits, start=1)
        ],
    )
    return SearchAnswer(out=out, timings=found.timings)


def skills_search_answer(identity: Identity, payload: SkillSearchIn, *, config: SearchConfig) -> SkillSearchOut:
    """What /skills/search answers (the endpoint and the MCP tool ``search_skills``)."""
    scope = payload_scope(identity, payload, kinds=[Source.Kind.SKILL])
    found = query_run(
        identity, query_parse(payload.query), scope=scope, k=payload.k, group=True, config=config, lines=False
    )
    hits = found.hits
    slugs = dict(Skill.objects.filter(source_id__in=[h.chunk.source_id for h in hits]).values_list("source_id", "slug"))
    return SkillSearchOut(
        query=payload.query,
        warnings=found.warnings,
        skills=[
            SkillHitOut(
                slug=slugs[h.chunk.source_id],
                title=h.title,
                score=h.score,
                best_section=h.chunk.context_prefix,
                citation=h.citation,
            )
            for h in hits
            if h.chunk.source_id in slugs
        ],
    )


def tools_search_answer(identity: Identity, payload: ToolSearchIn, *, config: SearchConfig) -> ToolSearchOut:
    """What /tools/search answers (the endpoint and the MCP tool ``search_tools``)."""
    scope = payload_scope(identity, payload, kinds=[Source.Kind.TOOL])
    found = query_run(
        identity, query_parse(payload.query), scope=scope, k=payload.k, group=True, config=config, lines=False
    )
    hits = found.hits
    tools = hits_tools(hits)
    return ToolSearchOut(
        query=payload.query,
        warnings=found.warnings,
        tools=[
            ToolHitOut(
                key=tools[h.chunk.source_id].key, score=h.score, openai_schema=tools[h.chunk.source_id].openai_schema
            )
            for h in hits
            if h.chunk.source_id in tools
        ],
    )


def hits_permalink_templates(hits: Iterable[Hit]) -> dict[int, str]:
    """The permalink templates of the git roots behind hits that carry a commit, by root id, in one query."""
    ids = {h.chunk.source.root_id for h in hits if h.chunk.source.root_id and (h.chunk.metadata or {}).get(COMMIT_KEY)}
    if not ids:
        return {}
    return dict(WorkspaceRoot.objects.filter(pk__in=ids).exclude(git_permalink="").values_list("pk", "git_permalink"))


def _hit_out(rank: int, hit: Hit, tools: dict[int, Tool], templates: dict[int, str], *, id_secret: str) -> HitOut:
    chunk = hit.chunk
    tool = tools.get(chunk.source_id)
    commit = (chunk.metadata or {}).get(COMMIT_KEY, "")
    template = templates.get(chunk.source.root_id or 0, "")
    return HitOut(
        chunk_id=chunk_public_id(chunk.pk, secret=id_secret),  # the table's key would count other tenants' chunks
        source=chunk.source.kind,
        source_key=chunk.source.key,
        title=hit.title,
        path=chunk.path,
        heading_path=chunk.context_prefix,
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        citation=hit.citation,
        language=chunk.language,
        symbol=chunk.symbol,
        content=chunk.content,
        contextual_description=(chunk.metadata or {}).get(DESCRIPTION_KEY, ""),
        rank=rank,
        score=hit.score,
        channels={name: _explained(s) for name, s in hit.channels.items()},
        fused=_explained(hit.fused) if hit.fused else None,
        rerank=_explained(hit.rerank) if hit.rerank else None,
        tool=tool.openai_schema if tool else None,
        commit=commit,
        permalink=permalink(template, commit=commit, path=chunk.path, start=chunk.start_line, end=chunk.end_line),
        vector_pending=chunk.vector_pending,
        snippets=[
            SnippetOut(
                chunk_id=chunk_public_id(more.chunk.pk, secret=id_secret),
                citation=more.citation,
                start_line=more.chunk.start_line,
                end_line=more.chunk.end_line,
                heading_path=more.chunk.context_prefix,
                symbol=more.chunk.symbol,
                content=more.chunk.content,
                score=more.score,
            )
            for more in hit.snippets
        ],
    )


def _explained(score: ChannelScore) -> ChannelOut:
    return ChannelOut(rank=score.rank, score=score.score)
