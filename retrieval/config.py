"""A search's configuration, read from settings once and passed in.

An evaluation run can compare configurations side by side by passing them
(``dataclasses.replace(SearchConfig.from_settings(), fusion=...)``) instead
of patching settings.
"""

from dataclasses import dataclass

from django.conf import settings

from retrieval.choices import FusionMethod, LexicalRanking, RerankBackend


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
    substring_scan: int  # chunks a query with no indexable word is matched against

    @classmethod
    def from_settings(cls) -> "LexicalConfig":
        return cls(
            ranking=settings.RAG_LEXICAL_RANKING,
            max_words=settings.RAG_LEXICAL_MAX_WORDS,
            postings=settings.RAG_LEXICAL_POSTINGS,
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
    device: str  # where the query's models run

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
            ),
            lexical=LexicalConfig.from_settings(),
            statement_timeout_ms=settings.RAG_SEARCH_STATEMENT_TIMEOUT_MS,
            hnsw_ef_search=settings.RAG_HNSW_EF_SEARCH,
            device=settings.RAG_EMBEDDING_DEVICE,
        )
