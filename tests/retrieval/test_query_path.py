"""The query path's CPU savers: the query-embedding cache, one torch thread per web process, the tuned embedded PG."""

import importlib
import os

import numpy as np
import pytest
from django.db import connection

from retrieval import search
from sources.embedding.local import torch_threads_apply
from sources.models import EmbeddingModel

MODEL = EmbeddingModel(provider="local", name="all-MiniLM-L6-v2", dimensions=384, normalized=True)


def _embed(query: str, *, cache_size: int):
    return search._embed(MODEL, query, device="cpu", cache_size=cache_size)


@pytest.mark.unit
def test_a_repeated_query_is_embedded_once():
    first, seconds = _embed("how do I reindex a root", cache_size=8)
    assert seconds > 0
    again, seconds = _embed("how do I reindex a root", cache_size=8)
    assert again is first and seconds == 0.0
    assert not first.flags.writeable  # shared between requests: nobody may change it
    other, seconds = _embed("how do I reindex a skill", cache_size=8)
    assert seconds > 0 and not np.array_equal(other, first)


@pytest.mark.unit
def test_the_cache_keeps_the_most_recent_queries_only():
    for query in ("alpha query", "beta query", "gamma query"):
        _embed(query, cache_size=2)
    assert _embed("gamma query", cache_size=2)[1] == 0.0
    assert _embed("alpha query", cache_size=2)[1] > 0  # pushed out by the two after it
    assert _embed("delta query", cache_size=0)[1] > 0 and _embed("delta query", cache_size=0)[1] > 0


@pytest.mark.unit
def test_web_processes_get_one_torch_thread(monkeypatch):
    import torch

    import rag_site.wsgi  # what gunicorn imports

    monkeypatch.delenv("RAG_TORCH_THREADS", raising=False)
    importlib.reload(rag_site.wsgi)
    assert os.environ["RAG_TORCH_THREADS"] == "1"
    before = torch.get_num_threads()
    try:
        torch_threads_apply()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.django_db
def test_the_embedded_server_is_tuned_for_search():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('jit'), current_setting('work_mem'), current_setting('random_page_cost')"
        )
        assert cursor.fetchone() == ("off", "16MB", "1.1")
        cursor.execute("SELECT current_setting('data_directory')")
        data_directory = cursor.fetchone()[0]
    assert "include_if_exists = 'rag_site.conf'" in open(os.path.join(data_directory, "postgresql.conf")).read()


@pytest.mark.unit
def test_a_bad_shared_buffers_size_stops_start_up_with_a_message(tmp_path, monkeypatch):
    from rag_site.embedded import ServiceError, postgres_tune

    (tmp_path / "postgresql.conf").write_text("# initdb's\n")
    monkeypatch.setenv("RAG_EMBEDDED_SHARED_BUFFERS", "lots")
    with pytest.raises(ServiceError, match="RAG_EMBEDDED_SHARED_BUFFERS must be a size"):
        postgres_tune(tmp_path)
    monkeypatch.setenv("RAG_EMBEDDED_SHARED_BUFFERS", "512MB")
    assert postgres_tune(tmp_path) is True
    assert "shared_buffers = '512MB'" in (tmp_path / "rag_site.conf").read_text()
    assert postgres_tune(tmp_path) is False  # written once; nothing to reload the next time
