import json

import pytest

from sources import services
from sources.models import IndexJob, JobStatus, Skill, WorkspaceRoot
from sources.roots import root_sources_sync
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def indexed():
    bodies = {
        "deploy": (
            "# Deploy\n\nShip the containers with docker compose.\n\n"
            "## Backups\n\nRun pg_dump every night to back up PostgreSQL.\n"
        ),
        "cooking": "# Cooking\n\nBoil pasta in salted water for nine minutes.\n",
    }
    for slug, body in bodies.items():
        services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)


def post(key_client, payload):
    return key_client.post("/api/v1/search", data=json.dumps(payload), content_type="application/json")


def test_hybrid_search_finds_the_section_and_explains_itself(key_client, indexed):
    response = post(key_client, {"query": "nightly database backup", "k": 3})
    assert response.status_code == 200
    top = response.json()["hits"][0]
    assert top["heading_path"] == "# Deploy > ## Backups"
    assert top["citation"] == "skill:deploy:5-7"
    assert top["source"] == "skill"
    assert set(top["channels"]) == {"lexical", "vector"}
    assert top["channels"]["vector"]["rank"] == 1


@pytest.mark.parametrize(
    ("mode", "stages"),
    [("hybrid", {"embed", "embed_wait", "lexical", "vector", "search"}), ("lexical", {"lexical", "search"})],
)
def test_a_search_says_where_its_time_went_in_server_timing(key_client, indexed, mode, stages):
    from measure.bench_load import server_timing_parse

    timings = server_timing_parse(post(key_client, {"query": "nightly database backup", "mode": mode})["Server-Timing"])
    assert set(timings) == stages
    assert all(ms >= 0 for ms in timings.values())


@pytest.mark.parametrize("mode", ["lexical", "vector"])
def test_a_single_channel_can_be_asked_for(key_client, indexed, mode):
    hits = post(key_client, {"query": "pasta water", "mode": mode})
    assert hits.status_code == 200
    assert hits.json()["hits"][0]["source_key"] == "skill:cooking"
    assert all(set(hit["channels"]) == {mode} for hit in hits.json()["hits"])


def test_a_query_that_matches_nothing_lexically_returns_no_lexical_hits(key_client, indexed):
    assert post(key_client, {"query": "the of and", "mode": "lexical"}).json()["hits"] == []


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 10_000}, "k"),
        ({"query": "x", "mode": "psychic"}, "mode"),
        ({}, "query"),
        ({"query": 42}, "query"),
    ],
)
def test_invalid_input_gets_a_422_naming_the_field(key_client, payload, field):
    response = post(key_client, payload)
    assert response.status_code == 422
    body = response.json()
    assert body["error"].startswith("invalid request:")
    assert any(message.startswith(f"{field}:") for message in body["errors"])


def test_malformed_json_gets_a_4xx_json_body(key_client):
    response = key_client.post("/api/v1/search", data="{not json", content_type="application/json")
    assert 400 <= response.status_code < 500
    assert "error" in response.json()


def test_skill_status_endpoint_says_why_indexing_failed(key_client):
    skill = SkillFactory(slug="broken")
    services.skill_index_failed(skill_id=skill.pk, reason="front matter is not valid YAML at line 2: boom")
    body = key_client.get("/api/v1/skills/broken").json()
    assert body["index_status"] == "failed"
    assert "not valid YAML" in body["last_error"]
    assert key_client.get("/api/v1/skills/nope").status_code == 404


def test_the_openapi_docs_are_served(key_client):
    assert key_client.get("/api/docs").status_code == 200
    assert "/api/v1/search" in key_client.get("/api/openapi.json").json()["paths"]


def test_mmr_is_optional_per_request_and_validated(key_client, indexed):
    plain = post(key_client, {"query": "backups and deploys", "k": 3}).json()["hits"]
    diverse = post(key_client, {"query": "backups and deploys", "k": 3, "mmr": True, "mmr_lambda": 0.5}).json()["hits"]
    assert {h["chunk_id"] for h in diverse} <= {
        h["chunk_id"] for h in post(key_client, {"query": "backups and deploys", "k": 50}).json()["hits"]
    }
    assert len(diverse) == len(plain) >= 2  # the cooking skill falls below the similarity threshold
    bad = post(key_client, {"query": "x", "mmr": True, "mmr_lambda": 2})
    assert bad.status_code == 422 and any(m.startswith("mmr_lambda:") for m in bad.json()["errors"])


def test_rerank_without_a_model_keeps_the_fused_order_and_says_why(key_client, indexed):
    plain = post(key_client, {"query": "nightly database backup", "k": 3}).json()
    asked = post(key_client, {"query": "nightly database backup", "k": 3, "rerank": True}).json()
    assert [h["chunk_id"] for h in asked["hits"]] == [h["chunk_id"] for h in plain["hits"]]
    assert asked["warnings"] == ["rerank skipped: no rerank model configured (RAG_RERANK_MODEL)"]
    assert all(h["rerank"] is None for h in asked["hits"])


def test_rerank_orders_by_the_cross_encoder_and_every_hit_explains_it(key_client, indexed, tiny_model, settings):
    from retrieval.rerank import cross_encoder_for

    settings.RAG_RERANK_MODEL = tiny_model
    settings.RAG_RERANK_MIN_CHARS = 0
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = -1.0
    body = post(key_client, {"query": "nightly database backup", "k": 5, "rerank": True}).json()
    hits = body["hits"]
    assert body["warnings"] == [] and len(hits) == 3
    expected = cross_encoder_for(tiny_model).score("nightly database backup", [h["content"] for h in hits])
    assert [h["rerank"]["score"] for h in hits] == pytest.approx(sorted(expected, reverse=True))
    assert [h["rerank"]["rank"] for h in hits] == [1, 2, 3] and [h["rank"] for h in hits] == [1, 2, 3]
    assert all(h["score"] == h["rerank"]["score"] and h["fused"]["rank"] >= 1 for h in hits)


def test_a_broken_rerank_model_keeps_the_fused_order(key_client, indexed, settings, tmp_path):
    settings.RAG_RERANK_MODEL = str(tmp_path / "not-a-model")
    settings.RAG_RERANK_MIN_CHARS = 0
    plain = post(key_client, {"query": "nightly database backup", "k": 3}).json()["hits"]
    body = post(key_client, {"query": "nightly database backup", "k": 3, "rerank": True}).json()
    assert [h["chunk_id"] for h in body["hits"]] == [h["chunk_id"] for h in plain]
    assert len(body["warnings"]) == 1 and "not-a-model" in body["warnings"][0]


def test_sources_still_being_indexed_are_said_in_the_warnings(key_client, indexed, tmp_path, settings):
    """Minutes after a first start a search found nothing and said only "try other words": the demo skills were
    still queued. Until their chunks are written, every search says how many sources are on their way."""
    SkillFactory(slug="queued-one", body="# Queued\n\nNot indexed yet.\n")
    SkillFactory(slug="queued-two", body="# Queued too\n\nNot indexed yet either.\n")
    body = post(key_client, {"query": "nightly database backup", "k": 3}).json()
    assert body["hits"] and body["warnings"] == ["2 sources are still being indexed; results may be incomplete"]
    assert post(key_client, {"query": "sym:anything"}).json()["warnings"] == []  # sym: reads files only
    # A root's first index, queued, counts as one more; once it succeeded a queued re-verify does not.
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    root = WorkspaceRoot.objects.create(name="notes", path=str(tmp_path), include_globs="*.md")
    root_sources_sync(root=root)
    job = IndexJob.objects.create(root=root)
    body = post(key_client, {"query": "nightly database backup", "k": 3}).json()
    assert body["warnings"] == ["3 sources are still being indexed; results may be incomplete"]
    body = post(key_client, {"query": "sym:anything"}).json()
    assert body["warnings"] == ["1 source is still being indexed; results may be incomplete"]
    IndexJob.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED)
    IndexJob.objects.create(root=root, trigger="reverify")
    assert post(key_client, {"query": "backup", "sources": ["file"]}).json()["warnings"] == []
    for skill in Skill.objects.filter(slug__startswith="queued-"):
        services.skill_index(skill_id=skill.pk)
    assert post(key_client, {"query": "nightly database backup", "k": 3}).json()["warnings"] == []
