"""The kernel's config objects and their builders: the one kernel module that reads ``django.conf.settings``.

Builders read the settings at call time (tests change them with
pytest-django's ``settings`` fixture) and return frozen config objects; the
other kernel modules take those objects and never read settings themselves.
"""

from dataclasses import dataclass, field

from django.conf import settings

from kernel.redis import RedisConfig

# Longest single wait between attempts: a model that needs more is better
# skipped for the next one (and a longer Retry-After opens its breaker that long).
RETRY_MAX_WAIT_SECONDS = 120.0


@dataclass(frozen=True)
class LLMConfig:
    """The language model client's provider, chain and retry policy (kernel.llm)."""

    base_url: str
    api_key: str = field(default="", repr=False)  # never in a repr, so never in a log line or traceback
    model: str = ""
    fallback_models: tuple[str, ...] = ()
    timeout: float = 60.0
    max_retries: int = 3
    retry_initial_wait: float = 2.0
    rate_limit_initial_wait: float = 90.0
    cooldown_seconds: float = 300.0
    max_wait: float = RETRY_MAX_WAIT_SECONDS

    @property
    def chain(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(m for m in (self.model, *self.fallback_models) if m))


def redis_config() -> RedisConfig:
    """The broker's Redis: Celery's queue, and the shared state of breakers, rate limits and heartbeats."""
    return RedisConfig(url=settings.CELERY_BROKER_URL)


def llm_config() -> LLMConfig:
    return LLMConfig(
        base_url=settings.RAG_LLM_BASE_URL,
        api_key=settings.RAG_LLM_API_KEY,
        model=settings.RAG_LLM_MODEL,
        fallback_models=tuple(settings.RAG_LLM_FALLBACK_MODELS),
        timeout=settings.RAG_LLM_TIMEOUT,
        max_retries=settings.RAG_LLM_MAX_RETRIES,
        retry_initial_wait=settings.RAG_LLM_RETRY_INITIAL_WAIT,
        rate_limit_initial_wait=settings.RAG_LLM_RATE_LIMIT_INITIAL_WAIT,
        cooldown_seconds=settings.RAG_LLM_FALLBACK_COOLDOWN_SECONDS,
    )
