"""Answers with citations: /context's parts as numbered sources, a chat model's streamed answer, its markers checked.

``answer_events`` yields the events every surface shows in this order:
``sources`` (what the model was given, numbered), ``delta`` (text as it is
written, markers naming no source already removed), then ``error`` if the
model could not answer, and always ``done`` last (the citations used, token
usage, warnings). It touches no database: the sources are loaded before, so
it can run in a thread beside the response that streams it
(surfaces/routes/answer.py) and hold no connection while the model writes.
"""

import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from kernel.llm import LLMClient, LLMError, LLMNotConfigured, LLMRejected, LLMUnavailable
from kernel.words import counted
from retrieval.assembly import SkillEntry
from retrieval.citing import MarkerReader, uncited_numeric_sentences
from retrieval.context import Context

PROMPT_VERSION = 1
_INSTRUCTIONS = (
    "You answer questions from numbered sources. Use only what the sources say. After each sentence, cite the "
    "sources it rests on by their numbers in square brackets, like [1] or [2][3]. Every sentence that states a number "
    "(a limit, a version, a date, a count) must cite the source it comes from, and copy the number exactly as the "
    "source gives it. Cite only the numbers listed. If the sources do not answer the question, say so in one sentence."
)


@dataclass(frozen=True, slots=True)
class AnswerSource:
    """One numbered source the model may cite: a part of the context, in the context's (edges-first) order."""

    number: int
    kind: str  # skill, file, document
    citation: str
    title: str
    path: str
    start_line: int | None
    end_line: int | None
    content: str
    url: str = ""  # where a person reads it (the viewer), set by the surface


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    name: str  # sources, delta, error, done
    data: dict[str, Any]


class Cancel:
    """A cancellation shared by a stream's reader and writer threads: callbacks registered after it fired run at
    once, so a model call that opens just as the client leaves is still closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self.cancelled = False

    def on_cancel(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if not self.cancelled:
                self._callbacks.append(callback)
                return
        callback()

    def __call__(self) -> None:
        with self._lock:
            self.cancelled, callbacks, self._callbacks = True, self._callbacks, []
        for callback in callbacks:
            callback()


def answer_sources(context: Context) -> list[AnswerSource]:
    """The context's parts, numbered from 1 in text order (best first and second best last)."""
    sources = []
    for number, part in enumerate(context.assembled.parts, start=1):
        item = part.item
        if isinstance(item, SkillEntry):
            sources.append(
                AnswerSource(
                    number, part.kind, part.citation, item.title, "", item.start_line, item.end_line, part.content
                )
            )
        else:
            sources.append(
                AnswerSource(
                    number, part.kind, part.citation, item.path, item.path, item.start_line, item.end_line, part.content
                )
            )
    return sources


def answer_messages(query: str, sources: list[AnswerSource]) -> list[dict[str, str]]:
    blocks = "\n\n".join(f"[{s.number}] {s.citation}\n{s.content.strip()}" for s in sources)
    return [
        {"role": "system", "content": _INSTRUCTIONS},
        {"role": "user", "content": f"Sources:\n\n{blocks}\n\nQuestion: {query}"},
    ]


def answer_events(
    *,
    query: str,
    sources: list[AnswerSource],
    client: Callable[[], LLMClient],
    max_tokens: int,
    warnings: list[str] | None = None,
    cancel: Cancel | None = None,
) -> Iterator[AnswerEvent]:
    """The answer to ``query`` from ``sources``, as events; ``cancel`` ends the model's call from another thread."""
    warnings = list(warnings or [])
    yield AnswerEvent("sources", {"sources": [asdict(s) for s in sources]})
    reader = MarkerReader(sources=len(sources))
    text: list[str] = []
    usage: dict[str, int] = {}
    if not sources:
        yield _error("empty_retrieval", "nothing you may see matches the question, so no answer was written")
    else:
        try:
            for piece, used in _written(query, sources, client=client, max_tokens=max_tokens, cancel=cancel):
                usage = used or usage
                if shown := reader.feed(piece):
                    text.append(shown)
                    yield AnswerEvent("delta", {"text": shown})
        except LLMError as exc:
            yield _error(_failure_kind(exc), exc.message)
        if tail := reader.flush():
            text.append(tail)
            yield AnswerEvent("delta", {"text": tail})
    uncited = uncited_numeric_sentences("".join(text))
    if reader.dropped:
        removed = "was" if reader.dropped == 1 else "were"
        warnings.append(
            f"{counted(reader.dropped, 'citation marker')} named no source and {removed} removed from the answer"
        )
    warnings.extend(f"a sentence states a number without citing a source: {s!r}" for s in uncited)
    by_number = {s.number: s for s in sources}
    yield AnswerEvent(
        "done",
        {
            "citations": [
                {"number": n, "citation": by_number[n].citation, "url": by_number[n].url} for n in reader.cited
            ],
            "usage": usage,
            "dropped_markers": reader.dropped,
            "uncited_numeric_sentences": uncited,
            "warnings": warnings,
        },
    )


def answer_collect(events: Iterator[AnswerEvent]) -> dict[str, Any]:
    """The events as one JSON object (the non-streaming form): sources, answer, error, and done's fields."""
    out: dict[str, Any] = {"sources": [], "answer": "", "error": None}
    text = []
    for event in events:
        if event.name == "sources":
            out["sources"] = event.data["sources"]
        elif event.name == "delta":
            text.append(event.data["text"])
        elif event.name == "error":
            out["error"] = event.data
        elif event.name == "done":
            out.update(event.data)
    out["answer"] = "".join(text)
    return out


def _written(
    query: str, sources: list[AnswerSource], *, client: Callable[[], LLMClient], max_tokens: int, cancel: Cancel | None
) -> Iterator[tuple[str, dict[str, int] | None]]:
    if cancel is not None and cancel.cancelled:
        return
    stream = client().chat_stream(answer_messages(query, sources), max_tokens=max_tokens)
    if cancel is not None:
        cancel.on_cancel(stream.cancel)
    with stream:
        for delta in stream:
            yield delta.text, delta.usage


def _error(kind: str, message: str) -> AnswerEvent:
    return AnswerEvent("error", {"kind": kind, "message": message})


def _failure_kind(exc: LLMError) -> str:
    """``not_configured``, ``rejected``, ``breaker_open`` (every model cooling down after failures), ``timeout`` or
    ``model_unavailable``: what a page or a bot tells its person."""
    if isinstance(exc, LLMNotConfigured):
        return "not_configured"
    if isinstance(exc, LLMRejected):
        return "rejected"
    models = exc.details.get("models", []) if isinstance(exc, LLMUnavailable) else []
    errors = {m.get("error") for m in models}
    if errors == {"cooldown"}:
        return "breaker_open"
    if errors == {"timeout"}:
        return "timeout"
    return "model_unavailable"
