"""Search: channels, fusion, rerank, the query models, context budgets, read and grep."""

from django.core.exceptions import ImproperlyConfigured

from rag_site.settings_registry import read_bool, read_choice, read_float, read_int, read_str, read_url
from retrieval.choices import FusionMethod, LexicalRanking, RerankBackend  # pure Python: safe to import from settings

# Web processes load the query models, the tokenizer and the reranker at start, in a background
# thread (retrieval/warmup.py), so no person pays the first load.
RAG_WARMUP = read_bool("RAG_WARMUP")
# Query embeddings kept per process (same text and model: no model call),
# least recently used first out; 0 turns the cache off.
RAG_QUERY_EMBEDDING_CACHE = read_int("RAG_QUERY_EMBEDDING_CACHE")
RAG_SEARCH_DEFAULT_K = read_int("RAG_SEARCH_DEFAULT_K")
RAG_SEARCH_MAX_K = read_int("RAG_SEARCH_MAX_K")
# Each channel fetches this many candidates before fusion; more costs latency
# and rarely changes the top 10 (the seeds fetch 2x k).
RAG_SEARCH_CANDIDATES = read_int("RAG_SEARCH_CANDIDATES")
# /api/v1/context: budgets are counted in this encoding (retrieval/tokens.py;
# the model that reads the context should use it); a request asks for at
# most RAG_CONTEXT_MAX_BUDGET_TOKENS.
RAG_CONTEXT_TOKENIZER = read_choice("RAG_CONTEXT_TOKENIZER")
RAG_CONTEXT_MAX_BUDGET_TOKENS = read_int("RAG_CONTEXT_MAX_BUDGET_TOKENS")
# Below this, with no shared word either, the page says "no good match" (retrieval/confidence.py).
RAG_SEARCH_GOOD_MATCH_SIMILARITY = read_float("RAG_SEARCH_GOOD_MATCH_SIMILARITY")
# Curated skills get their share of a context inline; every kind goes in only when close in meaning.
RAG_CONTEXT_SKILL_SHARE = read_float("RAG_CONTEXT_SKILL_SHARE")
RAG_CONTEXT_MIN_SIMILARITY = read_float("RAG_CONTEXT_MIN_SIMILARITY")
RAG_CONTEXT_NEAR_BEST = read_float("RAG_CONTEXT_NEAR_BEST")
# RRF constant from Cormack et al. (2009); the retrieval-quality issue
# replaces fixed RRF by whatever the eval command measures best.
RAG_RRF_K = read_int("RAG_RRF_K")
# MMR trade-off when a request asks for diversity (1 = relevance only).
RAG_MMR_LAMBDA = read_float("RAG_MMR_LAMBDA")
# Lexical ranking: "bm25" (Okapi BM25 computed in SQL, retrieval/lexical.py) or
# "ts_rank". Measured with `make eval`, lexical channel alone:
#   ts_rank: msmarco-5k nDCG@10 0.697, click hit@5 0.573, jinja2 hit@5 0.536
#   bm25:    msmarco-5k nDCG@10 0.731, click hit@5 0.658, jinja2 hit@5 0.633
# (rank_bm25 scores 0.681 on msmarco-5k and 0.467 hit@5 on click.)
# The registry lists the enum's values (a unit test keeps them equal), so a bad value fails with the same message.
RAG_LEXICAL_RANKING = LexicalRanking(read_choice("RAG_LEXICAL_RANKING"))
# Fusion: "convex" (cosine as it is + weight x BM25 / the query's top BM25),
# "minmax" (both min-max normalised over their candidates, weighted) or "rrf"
# (weighted Reciprocal Rank Fusion). Measured with `make eval` and the
# settings below; fused channel, vector alone in brackets (msmarco-5k
# nDCG@10; click hit@5, MRR@10; held-out jinja2 hit@5, MRR@10):
#   rrf, equal weights: 0.799 (0.805); 0.724 (0.704), 0.534 (0.557); 0.700 (0.723), 0.553 (0.538)
#   minmax, 0.3:        0.805 (0.805); 0.739 (0.704), 0.578 (0.557); 0.768 (0.723), 0.587 (0.538)
#   convex, 0.1:        0.811 (0.805); 0.734 (0.704), 0.572 (0.557); 0.764 (0.723), 0.588 (0.538)
# Only convex beats the vector channel on msmarco-5k as well. Cosine
# similarity is already on one scale for every query, so stretching it per
# query (minmax) makes a flat, unsure vector list look as decisive as a
# sharp one; BM25 has no fixed scale, so it is divided by its best score.
RAG_FUSION = FusionMethod(read_choice("RAG_FUSION"))
# Weight of the lexical channel against the vector channel (1.0) in fusion.
# For "convex" (msmarco-5k nDCG@10; click hit@5, MRR@10): 0.1: 0.811; 0.734,
# 0.572. 0.15: 0.809; 0.729, 0.568. 0.2: 0.805; 0.744, 0.580. 0.3: 0.802;
# 0.754, 0.578. Above 0.1 code gains a little and msmarco-5k falls to vector's.
RAG_FUSION_LEXICAL_WEIGHT = read_float("RAG_FUSION_LEXICAL_WEIGHT")
# Per query: the lexical weight from the query's shape and the vector channel's confidence, and code's preferences
# (definitions first, stylesheets and data files after code); measured in docs/quality.md.
RAG_FUSION_BY_QUERY = read_bool("RAG_FUSION_BY_QUERY")
# Pseudo-relevance feedback in the vector channel for questions over prose (retrieval/vector_feedback.py).
RAG_VECTOR_FEEDBACK = read_bool("RAG_VECTOR_FEEDBACK")
# Vector matches below these cosine similarities are dropped unless the
# lexical channel also found them (a keyword match rescues a borderline one).
# The seeds' defaults; evaluation datasets have no threshold.
RAG_SIMILARITY_THRESHOLD_SKILL = read_float("RAG_SIMILARITY_THRESHOLD_SKILL")
RAG_SIMILARITY_THRESHOLD_FILE = read_float("RAG_SIMILARITY_THRESHOLD_FILE")
RAG_SIMILARITY_THRESHOLD_TOOL = read_float("RAG_SIMILARITY_THRESHOLD_TOOL")
# Cross-encoder rerank: any sentence-transformers CrossEncoder, by local path
# or by a name already in the Hugging Face cache (the hub is not contacted).
# Empty = off. Requests turn it on with "rerank": true, or everywhere with
# RAG_RERANK_ENABLED. A failure keeps the fused order and says why.
RAG_RERANK_MODEL = read_str("RAG_RERANK_MODEL")
RAG_RERANK_ENABLED = read_bool("RAG_RERANK_ENABLED")
# Who reranks: "cross-encoder" (RAG_RERANK_MODEL), "llm" (the language
# model of RAG_LLM_*, RAG_RERANK_LLM_MODEL; it names the passages to keep, best first; settings/llm.py) or "api"
# (a hosted rerank service in the Cohere/Jina/Voyage/TEI shape, below).
RAG_RERANK_BACKEND = RerankBackend(read_choice("RAG_RERANK_BACKEND"))
# The rerank service: its endpoint's full URL, model and key (or RAG_RERANK_API_KEY_FILE), called through the
# language-model client's breaker (kernel/llm.py), one try per query.
RAG_RERANK_API_URL = read_url("RAG_RERANK_API_URL") or ""
RAG_RERANK_API_MODEL = read_str("RAG_RERANK_API_MODEL")
RAG_RERANK_API_KEY = read_str("RAG_RERANK_API_KEY")  # never logged
RAG_RERANK_API_TIMEOUT = read_float("RAG_RERANK_API_TIMEOUT")
if RAG_RERANK_BACKEND == RerankBackend.API and not (RAG_RERANK_API_URL and RAG_RERANK_API_MODEL):
    raise ImproperlyConfigured(
        "RAG_RERANK_BACKEND is api but RAG_RERANK_API_URL or RAG_RERANK_API_MODEL is empty: name the rerank "
        "endpoint (its full URL) and its model"
    )
if RAG_RERANK_ENABLED and RAG_RERANK_BACKEND == RerankBackend.CROSS_ENCODER and not RAG_RERANK_MODEL:
    raise ImproperlyConfigured("RAG_RERANK_ENABLED is on but RAG_RERANK_MODEL is empty: name a cross-encoder model")
# The fused head that is scored (and the most hits a reranked search returns).
RAG_RERANK_MAX_CHUNKS = read_int("RAG_RERANK_MAX_CHUNKS")
# Below this many characters in that head, a model call is not worth it.
RAG_RERANK_MIN_CHARS = read_int("RAG_RERANK_MIN_CHARS")
# Reranked chunks scoring below this (0..1, sigmoid of the model's logit) are dropped.
RAG_RERANK_SCORE_THRESHOLD = read_float("RAG_RERANK_SCORE_THRESHOLD")
# Bounded cost: the lexical channel reads a query's first words only (each
# OR-ed word widens its candidates), and every channel's SQL is cancelled past
# the timeout (the channel is then skipped with a warning, like a failing one).
RAG_LEXICAL_MAX_WORDS = read_int("RAG_LEXICAL_MAX_WORDS")
# Postings the lexical channel reads per query, shared among its words (rare
# words first, each at least the candidates asked for): its cost, whatever
# the corpus size. More reads common words deeper (closer to exhaustive
# BM25, see `rag_bench search`'s lexical agreement), at a linear cost.
RAG_LEXICAL_POSTINGS = read_int("RAG_LEXICAL_POSTINGS")
RAG_LEXICAL_READ_CEILING = read_int("RAG_LEXICAL_READ_CEILING")
# A query with no indexable word (stop words, punctuation such as "->") is
# matched as text in at most this many of the newest chunks in scope.
RAG_LEXICAL_SUBSTRING_SCAN = read_int("RAG_LEXICAL_SUBSTRING_SCAN")
RAG_SEARCH_STATEMENT_TIMEOUT_MS = read_int("RAG_SEARCH_STATEMENT_TIMEOUT_MS")
# Queries of more words than this are long (a pasted paragraph): at most
# RAG_SEARCH_LONG_QUERY_CONCURRENCY of them run at once in the whole
# deployment, the others wait up to RAG_SEARCH_LONG_QUERY_WAIT_MS for a turn
# (then 503). Four clients sending only 2,000-character queries tripled the
# others' p95 without it (retrieval/admission.py, `rag_bench search --contention`).
RAG_SEARCH_LONG_QUERY_WORDS = read_int("RAG_SEARCH_LONG_QUERY_WORDS")
RAG_SEARCH_LONG_QUERY_CONCURRENCY = read_int("RAG_SEARCH_LONG_QUERY_CONCURRENCY")
RAG_SEARCH_LONG_QUERY_WAIT_MS = read_int("RAG_SEARCH_LONG_QUERY_WAIT_MS")
# HNSW candidate list at query time (pgvector's default is 40).
RAG_HNSW_EF_SEARCH = read_int("RAG_HNSW_EF_SEARCH")
# Candidates kept while a vector is linked into a model's HNSW graph (sources/ingest.py).
RAG_HNSW_EF_CONSTRUCTION = read_int("RAG_HNSW_EF_CONSTRUCTION")
# Past this many chunks ef_search grows with the square root of the count
# (retrieval/vector.py): HNSW recall at a fixed ef_search falls as it grows.
RAG_HNSW_EF_SEARCH_SCALE_CHUNKS = read_int("RAG_HNSW_EF_SEARCH_SCALE_CHUNKS")
# /api/v1/read and /api/v1/grep (retrieval/files.py, retrieval/grep.py): bots
# verify citations. Caps keep one answer small: lines per read, matches per
# grep, and the files one grep scans when the trigram index cannot narrow its
# pattern (every other pattern is answered over every file, from the index).
RAG_READ_MAX_LINES = read_int("RAG_READ_MAX_LINES")
# One minified line can be the whole file: read's content is cut at whole lines below this many characters.
RAG_READ_MAX_CHARS = read_int("RAG_READ_MAX_CHARS")
RAG_GREP_MAX_MATCHES = read_int("RAG_GREP_MAX_MATCHES")
RAG_GREP_SCAN_FILES = read_int("RAG_GREP_SCAN_FILES")
