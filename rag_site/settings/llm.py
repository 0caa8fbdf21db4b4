"""The language model (optional): the client's API and retries, contextual retrieval, rerank by the model.

Last of the topics: its checks name settings of indexing and search that need the model's API.
"""

from django.core.exceptions import ImproperlyConfigured

from rag_site.settings.indexing import RAG_EMBEDDING_MODEL
from rag_site.settings.search import RAG_RERANK_BACKEND
from rag_site.settings_registry import read_bool, read_float, read_int, read_list, read_str, read_url
from retrieval.choices import RerankBackend  # pure Python: safe to import from settings

# Any OpenAI-compatible API (OpenAI, vLLM, llama.cpp's server, Ollama), used
# through kernel/llm.py. Unset base URL: no feature calls a language model.
RAG_LLM_BASE_URL = read_url("RAG_LLM_BASE_URL") or ""
RAG_LLM_API_KEY = read_str("RAG_LLM_API_KEY")  # or RAG_LLM_API_KEY_FILE; never logged
RAG_LLM_MODEL = read_str("RAG_LLM_MODEL")
RAG_LLM_FALLBACK_MODELS = read_list("RAG_LLM_FALLBACK_MODELS")
if (RAG_LLM_MODEL or RAG_LLM_FALLBACK_MODELS) and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured(
        "RAG_LLM_MODEL or RAG_LLM_FALLBACK_MODELS is set but RAG_LLM_BASE_URL is empty: name the API's base URL"
    )
RAG_LLM_TIMEOUT = read_float("RAG_LLM_TIMEOUT")
# Retries after a model's first failure (rate limits, timeouts, lost
# connections, 500/502/503/504), each after a full-jitter wait drawn from
# [0, initial * 2^retry] (at most 120 s); a 429's Retry-After is waited as given.
# The seed's defaults: 3 retries, 2 s, and 90 s for rate limits.
RAG_LLM_MAX_RETRIES = read_int("RAG_LLM_MAX_RETRIES")
RAG_LLM_RETRY_INITIAL_WAIT = read_float("RAG_LLM_RETRY_INITIAL_WAIT")
RAG_LLM_RATE_LIMIT_INITIAL_WAIT = read_float("RAG_LLM_RATE_LIMIT_INITIAL_WAIT")
# A model that failed its retries is skipped this long by every process (the
# breaker lives in Redis), then tried once before it is trusted again.
RAG_LLM_FALLBACK_COOLDOWN_SECONDS = read_float("RAG_LLM_FALLBACK_COOLDOWN_SECONDS")

# --- Contextual retrieval (optional; needs the language model above) ---------
# Before embedding, each chunk gets a one- or two-sentence description that
# situates it in its document, written by RAG_CONTEXTUAL_MODEL; it is
# prepended to the embedded text and indexed lexically. Part of every
# document's fingerprint: turning it on or off re-embeds at the next index run.
RAG_CONTEXTUAL_RETRIEVAL = read_bool("RAG_CONTEXTUAL_RETRIEVAL")
RAG_CONTEXTUAL_MODEL = read_str("RAG_CONTEXTUAL_MODEL") or RAG_LLM_MODEL
RAG_CONTEXTUAL_MAX_TOKENS = read_int("RAG_CONTEXTUAL_MAX_TOKENS")
# Description requests in flight at once per indexing process.
RAG_CONTEXTUAL_CONCURRENCY = read_int("RAG_CONTEXTUAL_CONCURRENCY")
if RAG_CONTEXTUAL_RETRIEVAL and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured(
        "RAG_CONTEXTUAL_RETRIEVAL is on but RAG_LLM_BASE_URL is empty: name the API that writes the descriptions"
    )
if RAG_CONTEXTUAL_RETRIEVAL and not RAG_CONTEXTUAL_MODEL:
    raise ImproperlyConfigured(
        "RAG_CONTEXTUAL_RETRIEVAL is on but no model is named: set RAG_CONTEXTUAL_MODEL or RAG_LLM_MODEL"
    )
# --- Rerank with the language model (RAG_RERANK_BACKEND=llm, settings/search.py) ---
RAG_RERANK_LLM_MODEL = read_str("RAG_RERANK_LLM_MODEL")  # empty: RAG_LLM_MODEL and its fallbacks
RAG_RERANK_LLM_PASSAGE_CHARS = read_int("RAG_RERANK_LLM_PASSAGE_CHARS")
# A query waits for the model: one try, bounded (the breaker skips a failing model for everyone).
RAG_RERANK_LLM_TIMEOUT = read_float("RAG_RERANK_LLM_TIMEOUT")
# --- Cited answers (POST /api/v1/answer and the search page; need the language model above) ---
RAG_ANSWER_MAX_TOKENS = read_int("RAG_ANSWER_MAX_TOKENS")
RAG_ANSWER_TIMEOUT = read_float("RAG_ANSWER_TIMEOUT")
RAG_ANSWER_KEEPALIVE_SECONDS = read_float("RAG_ANSWER_KEEPALIVE_SECONDS")
# Each answer being written holds a gunicorn thread: make run adds this many per web process (rag_run.web_command).
RAG_ANSWER_STREAMS = read_int("RAG_ANSWER_STREAMS")
# An API embedding model (RAG_EMBEDDING_MODEL, or a root's or segment's model
# name, "api:<model>[@<dimensions>]") is served by the same base URL.
if RAG_EMBEDDING_MODEL.startswith("api:") and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured(
        f"RAG_EMBEDDING_MODEL is {RAG_EMBEDDING_MODEL!r} but RAG_LLM_BASE_URL is empty: name the API that serves it"
    )
if RAG_RERANK_BACKEND == RerankBackend.LLM and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured("RAG_RERANK_BACKEND is llm but RAG_LLM_BASE_URL is empty: name the API that reranks")
if RAG_RERANK_BACKEND == RerankBackend.LLM and not (RAG_RERANK_LLM_MODEL or RAG_LLM_MODEL):
    raise ImproperlyConfigured(
        "RAG_RERANK_BACKEND is llm but no model is named: set RAG_RERANK_LLM_MODEL or RAG_LLM_MODEL"
    )
