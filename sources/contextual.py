"""Contextual descriptions: a sentence or two, written by a language model, that situate a chunk in its document.

A chunk cut from the middle of a file rarely names what it is about ("the
timeout is doubled here"); a description such as "This chunk is the retry
loop of the upload client..." gives the embedding and the lexical index the
missing context. Indexing asks for one per chunk (RAG_CONTEXTUAL_RETRIEVAL),
stores it in the chunk's metadata (``DESCRIPTION_KEY``) and prepends it to
the embedded text (``sources.ingest.embed_text``).

Each description is cached in ``ChunkDescription`` under a hash of the
document's content hash, the chunk's text and the describing identity
(model and prompt version), looked up in bulk: an unchanged chunk is never
described twice. A request that fails (the model down, the breaker open)
leaves that chunk without a description; the caller counts it, and the
document is marked for the next run to try again.
"""

import hashlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from kernel.config import LLMConfig
from kernel.llm import LLMError, llm_client
from sources.models import ChunkDescription

log = logging.getLogger(__name__)

# Bump when the prompt changes: every description is then written again (and re-embedded).
PROMPT_VERSION = "1"
# The document as the model sees it: its beginning, enough to know what it
# is about, short enough that a thousand chunks cost a bounded prompt each.
DOCUMENT_CHARS = 4000
# A description longer than this is a model rambling: the rest is dropped.
DESCRIPTION_CHARS = 600
# Keys per cache query: one round trip for a whole flush of chunks.
LOOKUP_BATCH = 2000

SYSTEM_PROMPT = (
    "You write index notes for a search engine. Given a document and one excerpt of it, answer with one or two "
    'sentences that begin with "This chunk" and say what the excerpt covers, what role it plays in the document, '
    "and which names (functions, settings, products, people) it concerns. Answer with the sentences only."
)


@dataclass(frozen=True, slots=True)
class DescriptionRequest:
    document_hash: str  # the document's content hash
    path: str  # shown to the model; "" for a skill or a tool
    document: str  # the document's text (only its start is sent)
    chunk: str  # the chunk's text


@dataclass(frozen=True, slots=True)
class ContextualConfig:
    """RAG_CONTEXTUAL_*: whether chunks are described, by which model, how long and how many at a time."""

    enabled: bool = False
    model: str = ""
    max_tokens: int = 150
    concurrency: int = 5
    llm: LLMConfig | None = None  # the language model client's provider and policy (None: RAG_LLM_* settings)


def contextual_identity(config: ContextualConfig) -> str:
    """ "" when descriptions are off; else the describing model and prompt version (part of every fingerprint)."""
    if not config.enabled:
        return ""
    return f"{config.model}#prompt-{PROMPT_VERSION}"


def description_key(request: DescriptionRequest, *, identity: str) -> str:
    return hashlib.sha256(
        "\x1f".join((request.document_hash, request.chunk, identity)).encode("utf-8", "surrogatepass")
    ).hexdigest()


def description_messages(request: DescriptionRequest) -> list[dict[str, str]]:
    document = request.document[:DOCUMENT_CHARS]
    if len(request.document) > DOCUMENT_CHARS:
        document += "\n[... the document continues]"
    name = f' path="{request.path}"' if request.path else ""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {
            "role": "user",
            "content": f"<document{name}>\n{document}\n</document>\n\n<excerpt>\n{request.chunk}\n</excerpt>",
        },
    ]


def descriptions_get(
    requests: Sequence[DescriptionRequest],
    *,
    config: ContextualConfig,
    on_progress: Callable[[], None] | None = None,
) -> list[str | None]:
    """A description per request, in order: from the cache, else from the model (None where it failed).

    ``on_progress`` runs in the calling thread after each model answer (a
    job's heartbeat): describing a thousand chunks takes minutes.
    """
    identity = contextual_identity(config)
    keys = [description_key(request, identity=identity) for request in requests]
    known = _cached(set(keys))
    missing = {key: request for key, request in zip(keys, requests, strict=True) if key not in known}
    if missing:
        written = _describe(missing, config=config, on_progress=on_progress)
        ChunkDescription.objects.bulk_create(
            [ChunkDescription(key=key, description=text, model=identity) for key, text in written.items()],
            batch_size=1000,
            ignore_conflicts=True,  # another worker may have described the same chunk meanwhile
        )
        known.update(written)
    return [known.get(key) for key in keys]


def _cached(keys: set[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    ordered = sorted(keys)
    for start in range(0, len(ordered), LOOKUP_BATCH):
        found.update(
            ChunkDescription.objects.filter(key__in=ordered[start : start + LOOKUP_BATCH]).values_list(
                "key", "description"
            )
        )
    return found


def _describe(
    requests: dict[str, DescriptionRequest], *, config: ContextualConfig, on_progress: Callable[[], None] | None
) -> dict[str, str]:
    """Ask the model for each request, ``config.concurrency`` at a time; returns the ones that succeeded."""
    try:
        client = llm_client(config.llm)
    except LLMError as exc:
        log.warning("contextual descriptions not written: %s", exc.message)
        return {}
    model, max_tokens = config.model, config.max_tokens

    def one(request: DescriptionRequest) -> str | None:
        try:
            # Only the contextual model: the cache records who wrote each description.
            text = client.chat(description_messages(request), max_tokens=max_tokens, models=(model,))
        except LLMError as exc:
            log.warning("contextual description not written: %s", exc.message)
            return None
        return " ".join(text.split())[:DESCRIPTION_CHARS] or None

    written: dict[str, str] = {}
    pool = ThreadPoolExecutor(max_workers=min(config.concurrency, len(requests)), thread_name_prefix="describe")
    try:
        futures = {pool.submit(one, request): key for key, request in requests.items()}
        for future in as_completed(futures):
            if (text := future.result()) is not None:
                written[futures[future]] = text
            if on_progress is not None:
                on_progress()  # may raise (the job was cancelled): the pool then drops what is queued
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return written
