"""The retrieval engine's configuration: read from settings once, at the edge, and passed in.

This is the engine's one config builder: the modules that search, count
tokens, assemble context or read files never read ``django.conf.settings``;
the edges (the routers, the MCP server, the page views, the warm-up's caller,
measure/) call a ``from_settings()`` here and hand the object down
(tests/test_config_edges.py keeps it so). Builders read settings at call
time, never at import: tests change settings per test.

An evaluation run can compare configurations side by side by passing them
(``dataclasses.replace(SearchConfig.from_settings(), fusion=...)``) instead
of patching settings.
"""

from dataclasses import dataclass, field

from django.conf import settings

from kernel.config import LLMConfig, llm_config
from retrieval.choices import FusionMethod, LexicalRanking, RerankBackend
from sources.config import extract_limits
from sources.extract import Limits


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Each kind's default similarity threshold (a source's own overrides it). Evaluation datasets have none:
    the eval measures ranking, not cut-offs."""

    skill: float
    file: float
    tool: float


@dataclass(frozen=True, slots=True)
class LexicalConfig:
    ranking: LexicalRanking
    max_words: int  # a long query's words past these are left to the vector channel
    postings: int  # postings read per query (see retrieval/lexical.py)
    read_ceiling: int  # the most a query reads, as a multiple of ``postings``
    substring_scan: int  # chunks a query with no indexable word is matched against

    @classmethod
    def from_settings(cls) -> "LexicalConfig":
        return cls(
            ranking=settings.RAG_LEXICAL_RANKING,
            max_words=settings.RAG_LEXICAL_MAX_WORDS,
            postings=settings.RAG_LEXICAL_POSTINGS,
            read_ceiling=settings.RAG_LEXICAL_READ_CEILING,
            substring_scan=settings.RAG_LEXICAL_SUBSTRING_SCAN,
        )


@dataclass(frozen=True, slots=True)
class RerankConfig:
    enabled: bool  # the default when a search does not say
    model: str  # the cross-encoder; empty: none configured (a rerank asked for is skipped with a warning)
    max_chunks: int
    min_chars: int
    score_threshold: float
    backend: RerankBackend = RerankBackend.CROSS_ENCODER
    llm_models: tuple[str, ...] = ()  # the llm backend's chain; empty: RAG_LLM_MODEL and its fallbacks
    llm_passage_chars: int = 800
    llm_timeout: float = 20.0
    # The api backend's service: its endpoint's full URL as base_url, its model and key; None: not configured.
    api: LLMConfig | None = None


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """How many long queries run at once (retrieval/admission.py)."""

    long_query_words: int  # a query of more words than these is long
    concurrency: int  # long queries running at once, across every web process
    wait_ms: int  # how long a long query waits for its turn before a 503

    @classmethod
    def from_settings(cls) -> "AdmissionLimits":
        return cls(
            long_query_words=settings.RAG_SEARCH_LONG_QUERY_WORDS,
            concurrency=settings.RAG_SEARCH_LONG_QUERY_CONCURRENCY,
            wait_ms=settings.RAG_SEARCH_LONG_QUERY_WAIT_MS,
        )


@dataclass(frozen=True, slots=True)
class SearchConfig:
    default_k: int
    candidates: int  # each channel's list, and the pool reranked and diversified (at least k)
    fusion: FusionMethod
    lexical_weight: float
    rrf_k: int
    thresholds: Thresholds
    mmr_lambda: float  # the default when a search does not say
    rerank: RerankConfig
    lexical: LexicalConfig
    statement_timeout_ms: int
    hnsw_ef_search: int
    hnsw_ef_search_scale_chunks: int  # past this many chunks ef_search grows (retrieval/vector.py); 0: never
    device: str  # where the query's models run
    query_embedding_cache: int  # query vectors kept per process
    admission: AdmissionLimits
    by_query: bool = True  # the lexical weight per query, code's preferences (RAG_FUSION_BY_QUERY)
    vector_feedback: bool = True  # prose questions searched again toward their first hits (RAG_VECTOR_FEEDBACK)
    # In a hybrid search, the lexical channel's first hits join that feedback (no setting: RAG_VECTOR_FEEDBACK
    # switches both; rag_eval's fused-nolexfb row turns this off to show the difference).
    lexical_feedback: bool = True
    # Below this cosine, first hits no word of the query found are "no good match" (retrieval/confidence.py).
    good_match_similarity: float = 0.0

    @classmethod
    def from_settings(cls) -> "SearchConfig":
        return cls(
            default_k=settings.RAG_SEARCH_DEFAULT_K,
            candidates=settings.RAG_SEARCH_CANDIDATES,
            fusion=settings.RAG_FUSION,
            lexical_weight=settings.RAG_FUSION_LEXICAL_WEIGHT,
            rrf_k=settings.RAG_RRF_K,
            thresholds=Thresholds(
                skill=settings.RAG_SIMILARITY_THRESHOLD_SKILL,
                file=settings.RAG_SIMILARITY_THRESHOLD_FILE,
                tool=settings.RAG_SIMILARITY_THRESHOLD_TOOL,
            ),
            mmr_lambda=settings.RAG_MMR_LAMBDA,
            rerank=RerankConfig(
                enabled=settings.RAG_RERANK_ENABLED,
                model=settings.RAG_RERANK_MODEL,
                max_chunks=settings.RAG_RERANK_MAX_CHUNKS,
                min_chars=settings.RAG_RERANK_MIN_CHARS,
                score_threshold=settings.RAG_RERANK_SCORE_THRESHOLD,
                backend=settings.RAG_RERANK_BACKEND,
                llm_models=(settings.RAG_RERANK_LLM_MODEL,) if settings.RAG_RERANK_LLM_MODEL else (),
                llm_passage_chars=settings.RAG_RERANK_LLM_PASSAGE_CHARS,
                llm_timeout=settings.RAG_RERANK_LLM_TIMEOUT,
                api=_rerank_api(),
            ),
            lexical=LexicalConfig.from_settings(),
            statement_timeout_ms=settings.RAG_SEARCH_STATEMENT_TIMEOUT_MS,
            hnsw_ef_search=settings.RAG_HNSW_EF_SEARCH,
            hnsw_ef_search_scale_chunks=settings.RAG_HNSW_EF_SEARCH_SCALE_CHUNKS,
            device=settings.RAG_EMBEDDING_DEVICE,
            query_embedding_cache=settings.RAG_QUERY_EMBEDDING_CACHE,
            admission=AdmissionLimits.from_settings(),
            by_query=settings.RAG_FUSION_BY_QUERY,
            vector_feedback=settings.RAG_VECTOR_FEEDBACK,
            good_match_similarity=settings.RAG_SEARCH_GOOD_MATCH_SIMILARITY,
        )


def _rerank_api() -> LLMConfig | None:
    if not settings.RAG_RERANK_API_URL:
        return None
    return LLMConfig(
        base_url=settings.RAG_RERANK_API_URL,
        api_key=settings.RAG_RERANK_API_KEY,
        model=settings.RAG_RERANK_API_MODEL,
        timeout=settings.RAG_RERANK_API_TIMEOUT,
        # One try while a person waits, as the llm backend; a failure opens the breaker for every process.
        max_retries=0,
        cooldown_seconds=settings.RAG_LLM_FALLBACK_COOLDOWN_SECONDS,
    )


@dataclass(frozen=True, slots=True)
class AnswerConfig:
    """What the search answer needs beyond the search: the key of the chunk ids callers see (retrieval/chunk_ids.py)."""

    search: SearchConfig
    chunk_id_secret: str = field(repr=False)  # SECRET_KEY: never in a log line or a test failure
    files: "FilesLimits | None" = None  # grep's, for re: and a lone "exact text"; None: from the settings

    @classmethod
    def from_settings(cls) -> "AnswerConfig":
        return cls(
            search=SearchConfig.from_settings(), chunk_id_secret=settings.SECRET_KEY, files=FilesLimits.from_settings()
        )


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """An LLM-ready context's searches and the tokenizer its budget is counted in (retrieval/context.py)."""

    search: SearchConfig
    tokenizer: str  # a retrieval.tokens.ENCODINGS name
    skill_share: float = 0.0  # of the budget, for skills' best sections inline
    min_similarity: float = -1.0  # every kind's hit at least this close in meaning, or left out
    margin: float = 0.0  # or this close to the closest hit, when that one clears min_similarity (context_floored)

    @classmethod
    def from_settings(cls) -> "ContextConfig":
        return cls(
            search=SearchConfig.from_settings(),
            tokenizer=settings.RAG_CONTEXT_TOKENIZER,
            skill_share=settings.RAG_CONTEXT_SKILL_SHARE,
            min_similarity=settings.RAG_CONTEXT_MIN_SIMILARITY,
            margin=settings.RAG_CONTEXT_NEAR_BEST,
        )


@dataclass(frozen=True, slots=True)
class CitedAnswerConfig:
    """A cited answer (retrieval/answering.py): its context, and how the chat model is called for it."""

    context: ContextConfig
    llm: LLMConfig  # the provider and chain (RAG_LLM_*); no base URL or model: answers are off
    max_tokens: int
    timeout: float  # seconds the model may stay silent
    keepalive_seconds: float  # a streamed answer's keep-alive comment after this much silence
    streams: int = 8  # answers written at once per web process (each holds a thread)

    @property
    def enabled(self) -> bool:
        return bool(self.llm.base_url and self.llm.chain)

    @classmethod
    def from_settings(cls) -> "CitedAnswerConfig":
        return cls(
            context=ContextConfig.from_settings(),
            llm=llm_config(),
            max_tokens=settings.RAG_ANSWER_MAX_TOKENS,
            timeout=settings.RAG_ANSWER_TIMEOUT,
            keepalive_seconds=settings.RAG_ANSWER_KEEPALIVE_SECONDS,
            streams=settings.RAG_ANSWER_STREAMS,
        )


@dataclass(frozen=True, slots=True)
class FilesLimits:
    """How much one read answers (retrieval/files.py) and how many files one unindexable grep scans (grep.py)."""

    read_max_lines: int
    read_max_chars: int
    grep_scan_files: int
    # A document is served as its extracted text, extracted again under indexing's limits (retrieval/documents.py).
    extract: Limits = Limits()
    max_document_bytes: int = 0

    @classmethod
    def from_settings(cls) -> "FilesLimits":
        return cls(
            read_max_lines=settings.RAG_READ_MAX_LINES,
            read_max_chars=settings.RAG_READ_MAX_CHARS,
            grep_scan_files=settings.RAG_GREP_SCAN_FILES,
            extract=extract_limits(),
            max_document_bytes=settings.RAG_EXTRACT_MAX_FILE_MB * 1024 * 1024,
        )


@dataclass(frozen=True, slots=True)
class WarmUpConfig:
    """What a web process loads before its first query (retrieval/warmup.py)."""

    search: SearchConfig  # the device, and the cross-encoder when rerank is on
    default_model: str  # loaded when no embedding model has vectors yet
    backend: str  # what runs the default model when it is a local one (RAG_EMBEDDING_BACKEND)
    tokenizer: str

    @classmethod
    def from_settings(cls) -> "WarmUpConfig":
        return cls(
            search=SearchConfig.from_settings(),
            default_model=settings.RAG_EMBEDDING_MODEL,
            backend=settings.RAG_EMBEDDING_BACKEND,
            tokenizer=settings.RAG_CONTEXT_TOKENIZER,
        )


@dataclass(frozen=True, slots=True)
class WireLimits:
    """The limits the API publishes in its schema (maxLength, maximum, defaults: retrieval/schemas.py)."""

    default_k: int
    max_k: int
    context_max_budget_tokens: int
    read_max_lines: int  # only in a field's description; the cap itself is FilesLimits'
    grep_max_matches: int

    @classmethod
    def from_settings(cls) -> "WireLimits":
        return cls(
            default_k=settings.RAG_SEARCH_DEFAULT_K,
            max_k=settings.RAG_SEARCH_MAX_K,
            context_max_budget_tokens=settings.RAG_CONTEXT_MAX_BUDGET_TOKENS,
            read_max_lines=settings.RAG_READ_MAX_LINES,
            grep_max_matches=settings.RAG_GREP_MAX_MATCHES,
        )
