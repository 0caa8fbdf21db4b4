"""RAG_RERANK_BACKEND=api's settings: read once at start-up, the key from a file too, a half configuration refused."""

import pytest

from tests.test_llm_client import settings_in_subprocess

pytestmark = pytest.mark.unit


def test_the_rerank_service_is_configured_by_url_model_and_a_key_from_a_file(tmp_path):
    (tmp_path / "rerank_key").write_text("co-from-a-file\n")
    result = settings_in_subprocess(
        "import django; django.setup()\nfrom retrieval.config import SearchConfig\n"
        "api = SearchConfig.from_settings().rerank.api\n"
        "print(api.base_url, api.model, api.api_key, api.max_retries, repr(api).count('co-from'))",
        RAG_RERANK_BACKEND="api",
        RAG_RERANK_API_URL="https://api.cohere.com/v2/rerank",
        RAG_RERANK_API_MODEL="rerank-v3.5",
        RAG_RERANK_API_KEY_FILE=str(tmp_path / "rerank_key"),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["https://api.cohere.com/v2/rerank", "rerank-v3.5", "co-from-a-file", "0", "0"]


@pytest.mark.parametrize(
    "environment",
    [
        {"RAG_RERANK_BACKEND": "api"},
        {"RAG_RERANK_BACKEND": "api", "RAG_RERANK_API_URL": "https://api.jina.ai/v1/rerank"},
        {"RAG_RERANK_BACKEND": "api", "RAG_RERANK_API_MODEL": "jina-reranker-v2"},
        {"RAG_RERANK_BACKEND": "api", "RAG_RERANK_API_URL": "api.jina.ai/v1/rerank", "RAG_RERANK_API_MODEL": "x"},
        {"RAG_RERANK_BACKEND": "cohere"},
    ],
)
def test_a_half_configured_rerank_service_fails_at_start_up(environment):
    result = settings_in_subprocess("settings.RAG_RERANK_BACKEND", **environment)
    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr
