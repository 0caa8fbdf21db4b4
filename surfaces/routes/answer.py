"""``POST /api/v1/answer``: a cited answer from /context's parts, streamed as Server-Sent Events or as one JSON.

The search page calls it too (static/js/answer.js, with the session's CSRF
token). The context is built here, in the request (its scope, its database
reads); the model's answer then streams from a thread that touches no
database (surfaces/sse.py), so a slow model holds one gunicorn thread and
no connection.
"""

import dataclasses
import threading
from collections.abc import Callable
from functools import partial

from django.http import StreamingHttpResponse
from django.urls import reverse
from ninja import Router
from ninja.decorators import decorate_view

from access.auth import READ_AUTH
from kernel.errors import Cooldown, Unavailable
from kernel.llm import llm_client
from retrieval.answering import AnswerSource, answer_collect, answer_events, answer_sources
from retrieval.assembly import Part, SkillEntry
from retrieval.config import CitedAnswerConfig
from retrieval.context import Context, context_for
from retrieval.query_language import query_parse
from retrieval.schemas import API_ERRORS, AnswerIn, AnswerOut
from sources.models import Chunk, Source, UploadedDocument
from surfaces.middleware import read_only
from surfaces.sse import sse_stream

router = Router(tags=["search"], auth=READ_AUTH)
# A person waits while the model answers: one retry after a quick failure, then the next model of the chain
# (a model that keeps failing is skipped by everyone through the breaker).
ANSWER_RETRIES = 1
# When every slot is taken: a page or bot may ask again this much later (most answers take seconds).
BUSY_RETRY_SECONDS = 5
NOT_CONFIGURED = (
    "cited answers are off: no chat model is configured (set RAG_LLM_BASE_URL and RAG_LLM_MODEL, then restart)"
)


# The schema names both bodies of a 200: JSON, and the event stream ``stream: true`` asks for (a client generated
# from the schema, or a checker, would otherwise take the stream for an undocumented answer).
STREAM_RESPONSE = {
    "responses": {
        200: {
            "content": {
                "text/event-stream": {
                    # One event: its name and its data (one JSON object); ': keep-alive' comments are no events.
                    "schema": {
                        "type": "object",
                        "properties": {
                            "event": {"type": "string", "enum": ["sources", "delta", "error", "done"]},
                            "data": {"type": "string", "contentMediaType": "application/json"},
                        },
                        "required": ["event", "data"],
                    }
                }
            }
        }
    }
}


@router.post("/answer", response={200: AnswerOut, **API_ERRORS}, url_name="answer", openapi_extra=STREAM_RESPONSE)
@decorate_view(read_only)
def answer(request, payload: AnswerIn):
    """An answer to ``query`` written by the chat model from /context's parts, each claim citing them as [n].

    ``stream: true`` answers ``text/event-stream``: ``sources`` (the numbered
    sources), ``delta`` (text; a marker naming no source is removed),
    ``error`` (the model is down, its breaker open, too slow, or nothing
    matched: the sources still come), ``done`` (citations used, usage,
    dropped markers, sentences with a number that cite nothing, warnings),
    and ``: keep-alive`` comments while the model is silent. Without it: one
    JSON object with the same content. 503 when no chat model is configured;
    429 (with Retry-After) when this server writes RAG_ANSWER_STREAMS answers already.
    """
    config = CitedAnswerConfig.from_settings()
    if not config.enabled:
        raise Unavailable(NOT_CONFIGURED, details={"setting": "RAG_LLM_BASE_URL"})
    release = _slot_take(config.streams)
    try:
        sources, warnings = answer_context(request.auth, payload, config=config)
        client = partial(_client, config)
        produce = partial(
            answer_events,
            query=query_parse(payload.query).search_text,  # the question the model reads: its words, not the filters
            sources=sources,
            client=client,
            max_tokens=config.max_tokens,
            warnings=warnings,
        )
        if not payload.stream:
            try:
                return AnswerOut(query=payload.query, **answer_collect(produce()))
            finally:
                release()
        response = _AnswerStream(
            sse_stream(lambda cancel: produce(cancel=cancel), keepalive=config.keepalive_seconds),
            content_type="text/event-stream; charset=utf-8",
            on_close=release,
        )
    except BaseException:
        release()
        raise
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx and the like: pass each event on as it comes
    return response


class _AnswerStream(StreamingHttpResponse):
    """The stream's response; the server closes every response it was given (also when the client left), so its
    answer slot is freed then, whether or not the stream was ever read."""

    def __init__(self, *args, on_close: Callable[[], None], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._on_close = on_close

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._on_close()


_slots_lock = threading.Lock()
_slots: tuple[int, threading.BoundedSemaphore] | None = None


def _slot_take(size: int) -> Callable[[], None]:
    """One of this process's ``size`` answer slots (each answer holds a thread while the model writes), as a
    release function safe to call twice; Cooldown (429, Retry-After) when all are taken."""
    global _slots
    with _slots_lock:
        if _slots is None or _slots[0] != size:
            _slots = (size, threading.BoundedSemaphore(size))
        slots = _slots[1]
    if not slots.acquire(blocking=False):
        raise Cooldown(
            f"{size} answers are being written on this server already (RAG_ANSWER_STREAMS); try again shortly",
            details={"retry_after_seconds": BUSY_RETRY_SECONDS},
        )
    held = [True]
    lock = threading.Lock()

    def release() -> None:
        with lock:
            if held:
                held.clear()
                slots.release()

    return release


def answer_context(identity, payload: AnswerIn, *, config: CitedAnswerConfig) -> tuple[list[AnswerSource], list[str]]:
    """The numbered sources (with the viewer's links) and warnings of /context for this request, in its scope."""
    k = payload.k.model_dump() | {"tool": 0}  # a tool's schema is not evidence for an answer
    context = context_for(
        identity,
        query=payload.query,
        budget=payload.budget_tokens,
        kinds=payload.sources,
        k=k,
        config=config.context,
        bot_id=payload.bot_id,
        client_id=payload.client_id,
        channels=payload.channels,
    )
    links = _links(context)
    sources = [dataclasses.replace(s, url=links[s.number - 1]) for s in answer_sources(context)]
    return sources, context.warnings


def _client(config: CitedAnswerConfig):
    return llm_client(config.llm).with_options(timeout=config.timeout, max_retries=ANSWER_RETRIES)


def _links(context: Context) -> list[str]:
    """Each part's place in the viewer, at its lines (as the search page links a hit)."""
    parts = context.assembled.parts
    chunk_ids = [i for p in parts if not isinstance(p.item, SkillEntry) for i in p.item.chunk_ids[:1]]
    sources = dict(Chunk.objects.filter(pk__in=chunk_ids).values_list("pk", "source_id"))
    uploaded = dict(UploadedDocument.objects.filter(source_id__in=set(sources.values())).values_list("source_id", "pk"))
    return [_link(part, sources, uploaded) for part in parts]


def _link(part: Part, sources: dict[int, int], uploaded: dict[int, int]) -> str:
    item = part.item
    if isinstance(item, SkillEntry):
        return reverse("view-skill", args=[item.slug]) + (
            f"#L{item.start_line}-L{item.end_line}" if item.start_line else ""
        )
    anchor = f"#L{item.start_line}-L{item.end_line}"
    if item.kind == Source.Kind.FILE and item.root_id is not None:
        return reverse("view-file", args=[item.root_id, item.path]) + anchor
    source_id = sources.get(item.chunk_ids[0]) if item.chunk_ids else None
    if item.kind == Source.Kind.DOCUMENT and source_id in uploaded:
        return reverse("view-document", args=[uploaded[source_id]]) + anchor
    return ""
