import json

import pytest

from access.scope import Scope
from retrieval.search import Mode, chunks_search
from sources import services
from sources.models import EmbeddingModel, Source
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def skills():
    bodies = {
        "deploy": "# Deploy\n\nShip the containers with docker compose.\n\n## Backups\n\nRun pg_dump every night.\n\n"
        "## Rollback\n\nRestore last night's pg_dump when a deploy goes wrong.\n",
        "cooking": "# Cooking\n\nBoil pasta in salted water for nine minutes.\n",
    }
    for slug, body in bodies.items():
        services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)


def keys(hits) -> list[str]:
    return [h.chunk.source.key for h in hits]


def test_a_vector_match_below_the_threshold_is_dropped_unless_lexical_finds_it(skills, settings):
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = 0.99  # no chunk is that similar
    assert not chunks_search(query="boil pasta", mode=Mode.VECTOR)
    hits = chunks_search(query="boil pasta", mode=Mode.HYBRID)
    assert keys(hits) == ["skill:cooking"]  # the keyword match rescues it
    assert hits[0].channels["vector"].score < 0.99

    settings.RAG_SIMILARITY_THRESHOLD_SKILL = -1.0
    assert set(keys(chunks_search(query="boil pasta", mode=Mode.VECTOR))) == {"skill:cooking", "skill:deploy"}


def test_every_hit_explains_its_channel_ranks_and_fused_score(skills):
    hits = chunks_search(query="restore a backup after a bad deploy", k=3)
    top = hits[0]
    assert top.chunk.context_prefix == "# Deploy > ## Rollback"
    assert set(top.channels) == {"lexical", "vector"}
    assert top.fused.rank == 1 and top.fused.score == top.score
    assert top.rerank is None and hits.warnings == []


def test_grouping_keeps_the_best_chunk_of_each_skill(skills, settings):
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = -1.0
    flat = chunks_search(query="pg_dump backups", k=10)
    grouped = chunks_search(query="pg_dump backups", k=10, group=True)
    assert keys(flat).count("skill:deploy") > 1
    assert sorted(keys(grouped)) == ["skill:cooking", "skill:deploy"]
    assert grouped[0].chunk.pk == flat[0].chunk.pk  # the best chunk stands for its skill


def test_a_model_that_cannot_load_is_skipped_with_a_warning(skills):
    missing = EmbeddingModel.objects.create(provider="local", name="/nowhere/no-such-model", dimensions=8)
    Source.objects.create(key="skill:ghost", kind=Source.Kind.SKILL, embedding_model=missing)
    hits = chunks_search(query="pg_dump backups")
    assert keys(hits)[0] == "skill:deploy"  # lexical and the working model still answer
    assert len(hits.warnings) == 1 and "no-such-model" in hits.warnings[0]


def test_a_query_fails_plainly_when_its_only_channel_fails(skills):
    missing = EmbeddingModel.objects.create(provider="local", name="/nowhere/no-such-model", dimensions=8)
    Source.objects.filter(kind=Source.Kind.SKILL).update(embedding_model=missing)
    from kernel.errors import ApplicationError, Unavailable

    with pytest.raises(ApplicationError) as failure:
        chunks_search(query="pg_dump backups", mode=Mode.VECTOR)
    assert isinstance(failure.value, Unavailable) and "no-such-model" in failure.value.message
    assert keys(chunks_search(query="pg_dump backups", mode=Mode.HYBRID))[0] == "skill:deploy"


def test_the_skill_index_lists_each_skill_once(key_client, skills):
    response = key_client.post(
        "/api/v1/skills/search", data=json.dumps({"query": "pg_dump backups", "k": 5}), content_type="application/json"
    )
    assert response.status_code == 200
    skills_found = response.json()["skills"]
    assert [s["slug"] for s in skills_found][0] == "deploy"
    assert len({s["slug"] for s in skills_found}) == len(skills_found)
    assert skills_found[0]["best_section"].startswith("# Deploy")
    assert skills_found[0]["citation"].startswith("skill:deploy:")


def test_search_scope_still_applies_to_the_rescued_keyword_matches(skills, settings):
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = 0.99
    Source.objects.filter(key="skill:cooking").update(bot_id="bot-a")
    assert not chunks_search(query="boil pasta", scope=Scope(bot_ids=("bot-b",)))
    assert keys(chunks_search(query="boil pasta", scope=Scope(bot_ids=("bot-a",)))) == ["skill:cooking"]


def test_a_source_threshold_overrides_its_kind_default(skills, settings):
    settings.RAG_SIMILARITY_THRESHOLD_SKILL = -1.0
    Source.objects.filter(key="skill:cooking").update(similarity_threshold=0.99)
    assert keys(chunks_search(query="boil pasta", mode=Mode.VECTOR, k=10)) == ["skill:deploy"] * 3


def test_roots_and_segments_hand_their_thresholds_to_their_sources(tmp_path, settings):
    from sources.models import Segment, WorkspaceRoot
    from sources.roots import root_sources_sync

    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    root = WorkspaceRoot.objects.create(name="repo", path=str(tmp_path), similarity_threshold=0.4)
    Segment.objects.create(root=root, name="docs", path_glob="docs/**", similarity_threshold=0.2)
    Segment.objects.create(root=root, name="api", path_glob="api/**")
    root_sources_sync(root=root)
    thresholds = dict(
        Source.objects.filter(key__startswith=f"root:{root.pk}").values_list("title", "similarity_threshold")
    )
    assert thresholds == {"repo": 0.4, "repo: docs": 0.2, "repo: api": 0.4}
