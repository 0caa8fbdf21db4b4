"""Warm-up: a web process loads what the first query would otherwise wait for, as soon as it starts.

The query embedding models (every model that has vectors, else
RAG_EMBEDDING_MODEL), the context tokenizer and, when rerank is on, the
cross-encoder: several seconds each on first use. It runs in a background
thread so the process serves at once; a query that arrives meanwhile waits
for the same load (the loaders are locked), never loads twice.
"""

import logging
import threading
import time

from django.db import DatabaseError, connections

from retrieval.config import WarmUpConfig
from retrieval.rerank import cross_encoder_for
from retrieval.tokens import token_count
from sources.embedding import EmbeddingError, embedder_for, model_reference
from sources.models import EmbeddingModel

log = logging.getLogger(__name__)


def warm_up(config: WarmUpConfig) -> list[str]:
    """Load the models now; returns what was loaded (failures are logged, never raised)."""
    search = config.search
    loaded = []
    try:
        models = set(EmbeddingModel.objects.values_list("provider", "name"))
    except DatabaseError as exc:
        log.warning("warm-up: the embedding models could not be listed (%s); loading the default one", exc)
        models = set()
    default = model_reference(config.default_model, backend=config.backend)  # the model the first index run creates
    for provider, name in sorted(models or {default}):
        try:
            embedder_for(provider=provider, name=name, device=search.device).embed(["warm up"], purpose="query")
            loaded.append(f"embedding model {name}")
        except EmbeddingError as exc:
            log.warning("warm-up: embedding model %s not loaded: %s", name, exc)
    token_count("warm up", encoding=config.tokenizer)
    loaded.append(f"tokenizer {config.tokenizer}")
    if search.rerank.enabled:
        try:
            cross_encoder_for(search.rerank.model, device=search.device).score("warm up", ["warm up"])
            loaded.append(f"cross-encoder {search.rerank.model}")
        except Exception as exc:  # noqa: BLE001 - a reranker that fails is skipped by search with a warning too
            log.warning("warm-up: cross-encoder %s not loaded: %s", search.rerank.model, exc)
    return loaded


def warm_up_in_background(config: WarmUpConfig) -> threading.Thread:
    def run() -> None:
        started = time.perf_counter()
        try:
            loaded = warm_up(config)
            log.info("warm-up: %s loaded in %.1f s", ", ".join(loaded), time.perf_counter() - started)
        except Exception:  # noqa: BLE001 - never take the process down: the first query loads instead
            log.exception("warm-up failed; the first query loads the models instead")
        finally:
            connections.close_all()  # this thread's connection

    thread = threading.Thread(target=run, name="rag-warm-up", daemon=True)
    thread.start()
    return thread
