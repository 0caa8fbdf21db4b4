"""GET /metrics: who may scrape it, and that searches, index jobs and language-model failures move its numbers."""

import json
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from kernel.llm import LLMError, llm_chat
from retrieval import search
from retrieval.config import SearchConfig
from retrieval.search import Mode, chunks_search
from sources import services
from sources.models import Skill
from sources.queueing import BROKER_WAIT
from tests.conftest import broker_outage, index_root
from tests.factories import SkillFactory
from tests.openai_server import http_error

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "scrape-token-for-tests-0123456789"


@pytest.fixture
def metrics_on(settings):
    settings.RAG_METRICS_TOKEN = TOKEN
    settings.RAG_METRICS_ALLOW_NETWORKS = []
    return settings


def scrape(client, *, token: str = TOKEN, **extra) -> str:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {token}"}, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return response.content.decode()


def value(text: str, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly these labels (0 when the scrape has none yet)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def test_metrics_answer_404_while_no_token_is_set(client, settings):
    settings.RAG_METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer anything"}).status_code == 404


def test_a_missing_or_wrong_token_is_refused_with_401(client, metrics_on):
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert TOKEN.encode() not in missing.content


def test_an_address_outside_the_allowed_networks_is_refused_whatever_its_token(client, metrics_on):
    metrics_on.RAG_METRICS_ALLOW_NETWORKS = ["10.0.0.0/8", "192.0.2.7/32"]
    outside = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, REMOTE_ADDR="198.51.100.1")
    assert outside.status_code == 403
    assert b"RAG_METRICS_ALLOW_NETWORKS" in outside.content
    assert scrape(client, REMOTE_ADDR="10.1.2.3")
    assert scrape(client, REMOTE_ADDR="192.0.2.7")


def test_a_scrape_over_plain_http_is_not_redirected_to_https(client, metrics_on):
    metrics_on.SECURE_SSL_REDIRECT = True  # as under compose, where Prometheus reaches web directly
    assert client.get("/accounts/login/").status_code == 301
    assert scrape(client)


def test_a_search_is_counted_by_route_mode_stage_and_query_cache(client, key_client, metrics_on):
    services.skill_index(skill_id=SkillFactory(slug="deploy", body="# Deploy\n\nRun pg_dump every night.\n").pk)
    query = f"nightly backup {uuid.uuid4().hex[:6]}"  # new to this process's query cache
    before = scrape(client)
    for _ in range(2):
        response = key_client.post(
            "/api/v1/search", data=json.dumps({"query": query, "mode": "hybrid"}), content_type="application/json"
        )
        assert response.status_code == 200
    after = scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("rag_http_requests_total", route="api/v1/search", method="POST", status="200") == 2
    assert moved("rag_http_request_duration_seconds_count", route="api/v1/search") == 2
    assert moved("rag_search_duration_seconds_count", mode="hybrid") == 2
    for stage in ("embed", "embed_wait", "lexical", "vector", "search"):
        assert moved("rag_search_stage_seconds_count", stage=stage) == 2, stage
    assert moved("rag_query_embedding_cache_total", result="miss") == 1
    assert moved("rag_query_embedding_cache_total", result="hit") == 1
    # The scrape itself is a request too, by its route, not its path.
    assert moved("rag_http_requests_total", route="metrics", method="GET", status="200") == 1


def test_a_channel_cut_off_by_the_statement_timeout_is_counted_as_skipped(client, metrics_on, monkeypatch):
    services.skill_index(skill_id=SkillFactory(slug="deploy", body="# Deploy\n\nRun pg_dump every night.\n").pk)

    def slow_lexical(**_):
        with connection.cursor() as cursor:  # runs under the search session's real statement_timeout
            cursor.execute("SELECT pg_sleep(2)")
        return []

    monkeypatch.setattr(search, "lexical_candidates", slow_lexical)
    before = scrape(client)
    result = chunks_search(
        query="pg_dump", mode=Mode.HYBRID, config=replace(SearchConfig.from_settings(), statement_timeout_ms=50)
    )
    after = scrape(client)
    assert any("took longer than RAG_SEARCH_STATEMENT_TIMEOUT_MS" in w for w in result.warnings)
    labels = {"channel": "lexical", "reason": "timeout"}
    assert value(after, "rag_search_channel_skipped_total", **labels) == (
        value(before, "rag_search_channel_skipped_total", **labels) + 1
    )


def test_an_index_job_is_counted_in_jobs_by_state_and_chunks_embedded(client, metrics_on, readme_root):
    (Path(readme_root.path) / "guide.md").write_text("# Guide\n\nStart the worker.\n\n## Stop\n\nPress Ctrl-C.\n")
    before = scrape(client)
    job = index_root(readme_root)
    after = scrape(client)
    assert job.status == "succeeded"
    assert job.chunks_embedded > 0
    embedded = sum(
        s.value - value(before, s.name, **s.labels)
        for family in text_string_to_metric_families(after)
        for s in family.samples
        if s.name == "rag_chunks_embedded_total"
    )
    assert embedded == job.chunks_embedded
    assert value(after, "rag_index_jobs", state="succeeded") == value(before, "rag_index_jobs", state="succeeded") + 1
    assert {"queued", "running", "failed", "cancelled"} <= {
        s.labels["state"]
        for family in text_string_to_metric_families(after)
        for s in family.samples
        if s.name == "rag_index_jobs"
    }


def test_a_failing_language_model_is_counted_and_its_breaker_shows_open(client, metrics_on, openai_server):
    model = f"failing-{uuid.uuid4().hex[:8]}"  # the breaker's state in Redis is per model name
    openai_server.fail_always(model, http_error(500))
    metrics_on.RAG_LLM_BASE_URL = openai_server.base_url
    metrics_on.RAG_LLM_MODEL = model
    metrics_on.RAG_LLM_MAX_RETRIES = 0
    before = scrape(client)
    with pytest.raises(LLMError):
        llm_chat(messages=[{"role": "user", "content": "hello"}], max_tokens=5)
    with pytest.raises(LLMError):
        llm_chat(messages=[{"role": "user", "content": "hello"}], max_tokens=5)  # skipped: cooling down
    after = scrape(client)
    assert (
        value(after, "rag_llm_calls_total", model=model, outcome="server")
        - value(before, "rag_llm_calls_total", model=model, outcome="server")
        == 1
    )
    assert value(after, "rag_llm_calls_total", model=model, outcome="cooldown") == 1
    assert value(after, "rag_llm_breaker_state", model=model, state="open") == 1
    assert value(after, "rag_llm_breaker_state", model=model, state="closed") == 0


def test_the_state_read_at_scrape_time_is_all_there(client, metrics_on):
    text = scrape(client)
    for part in ("index_jobs", "queues", "llm_breakers", "db_connections"):
        assert value(text, "rag_scrape_ok", part=part) == 1, part
    assert value(text, "rag_queue_depth", queue="interactive") >= 0
    assert "rag_queue_depth" in text and 'queue="bulk"' in text
    assert value(text, "rag_db_connections", state="active") >= 1  # this scrape's own query


def test_counters_of_several_processes_are_summed_in_one_scrape(client, metrics_on, monkeypatch, tmp_path):
    directory = tmp_path / "metrics"
    directory.mkdir()
    increment = (
        "import sys; from kernel import metrics; "
        "metrics.CHUNKS_EMBEDDED.labels(model='summed-model').inc(int(sys.argv[1])); "
        "metrics.process_dead()"  # a worker's exit keeps what it counted
    )
    for amount in ("3", "4"):
        subprocess.run(
            [sys.executable, "-c", increment, amount],
            cwd=ROOT,
            env={"PROMETHEUS_MULTIPROC_DIR": str(directory), "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            check=True,
        )
    assert len(list(directory.glob("counter_*.db"))) == 2  # one file per process
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    assert value(scrape(client), "rag_chunks_embedded_total", model="summed-model") == 7


@pytest.mark.django_db(transaction=True)
def test_work_that_waits_for_the_broker_is_counted_and_the_queues_part_says_unreadable(client, metrics_on):
    before = scrape(client)
    with broker_outage():
        skill = Skill.objects.create(slug="waits", body="# Waits\n\nFor the broker.\n")  # queued after commit
        down = scrape(client)
    skill.refresh_from_db()
    assert skill.last_error.startswith(BROKER_WAIT)
    assert (
        value(down, "rag_broker_waits_total", kind="skill") == value(before, "rag_broker_waits_total", kind="skill") + 1
    )
    assert value(down, "rag_scrape_ok", part="queues") == 0
    assert value(down, "rag_scrape_ok", part="db_connections") == 1


ZEROED = (
    ("rag_search_channel_skipped_total", {"channel": "vector", "reason": "timeout"}),
    ("rag_search_channel_skipped_total", {"channel": "lexical", "reason": "error"}),
    ("rag_broker_waits_total", {"kind": "skill"}),
    ("rag_broker_waits_total", {"kind": "indexjob"}),
    ("rag_llm_calls_total", {"model": "zero-model", "outcome": "ok"}),
    ("rag_llm_calls_total", {"model": "zero-model", "outcome": "timeout"}),
    ("rag_llm_calls_total", {"model": "zero-model", "outcome": "cooldown"}),
)


def test_a_fresh_scrape_lists_the_counters_that_move_only_on_trouble_at_zero(tmp_path):
    """Before their first event (issue 43): a dashboard shows 0, not "No data". A fresh process in gunicorn's
    multiprocess mode, as `make run` scrapes."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    scrape_once = (
        "import django, sys; django.setup(); "
        "from kernel.config import LLMConfig; from surfaces.metrics import metrics_text; "
        "sys.stdout.write(metrics_text(llm=LLMConfig(base_url='http://127.0.0.1:9/v1', model='zero-model'), "
        "multiprocess_dir=sys.argv[1]).decode())"
    )
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory), "DJANGO_SETTINGS_MODULE": "rag_site.settings"}
    text = subprocess.run(
        [sys.executable, "-c", scrape_once, str(directory)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert text.returncode == 0, text.stderr
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text.stdout)
        for sample in family.samples
    }
    for name, labels in ZEROED:
        assert samples.get((name, tuple(sorted(labels.items())))) == 0, (name, labels)
