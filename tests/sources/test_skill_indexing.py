import hashlib

import pytest
from django.db import connection

from sources import services
from sources.ingest import IngestSettings, fingerprint
from sources.models import Chunk, EmbeddingModel, IndexStatus, Skill, Source
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db

BODY = (
    "---\nname: Deployment guide\n---\n# Deploy\n\nShip it with docker compose.\n\n"
    "## Backups\n\nRun pg_dump every night.\n"
)


def test_it_stores_one_chunk_per_section_with_real_embeddings():
    skill = SkillFactory(body=BODY)
    outcome = services.skill_index(skill_id=skill.pk)
    assert outcome.chunks_embedded == 2
    chunks = list(Chunk.objects.filter(source__skill=skill).order_by("chunk_index"))
    assert [c.context_prefix for c in chunks] == ["# Deploy", "# Deploy > ## Backups"]
    assert chunks[1].start_line == 8 and chunks[1].end_line == 10
    assert len(chunks[0].embedding) == 384
    assert chunks[0].embedding_model.spec.identity == "local:all-MiniLM-L6-v2#onnx:384:norm"
    skill.refresh_from_db()
    assert skill.index_status == IndexStatus.INDEXED
    assert skill.metadata == {"name": "Deployment guide"}
    assert skill.source.title == "Deployment guide"


def test_the_model_gets_a_partial_hnsw_index_on_halfvec(settings):
    services.skill_index(skill_id=SkillFactory(body=BODY).pk)
    model = EmbeddingModel.objects.get()
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [model.hnsw_index_name])
        (definition,) = cursor.fetchone()
    assert "hnsw" in definition and "halfvec(384)" in definition and "halfvec_cosine_ops" in definition
    assert f"ef_construction='{settings.RAG_HNSW_EF_CONSTRUCTION}'" in definition
    assert f"embedding_model_id = {model.pk}" in definition


def test_it_skips_an_unchanged_skill():
    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    first_ids = set(Chunk.objects.values_list("pk", flat=True))
    assert services.skill_index(skill_id=skill.pk).skipped
    assert set(Chunk.objects.values_list("pk", flat=True)) == first_ids


def test_a_title_edit_renames_the_source_without_re_embedding_and_a_chunker_setting_re_embeds(settings):
    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    skill.refresh_from_db()
    assert skill.content_hash == hashlib.sha256(BODY.encode()).hexdigest()  # the body a bot reads, checkable
    Skill.objects.filter(pk=skill.pk).update(title="Shipping")
    assert services.skill_index(skill_id=skill.pk).skipped  # the title is not in the chunks
    assert Source.objects.get(skill=skill).title == "Shipping"
    settings.RAG_CHUNK_MAX_CHARS = 900
    outcome = services.skill_index(skill_id=skill.pk)
    assert not outcome.skipped and outcome.chunks_embedded == 2
    assert services.skill_index(skill_id=skill.pk).skipped


def test_a_new_chunk_overlap_re_embeds_no_skill(settings):
    """A skill is chunked at the markdown chunker's own overlap: RAG_CHUNK_OVERLAP changes none of its chunks."""
    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    ids = set(Chunk.objects.values_list("pk", flat=True))
    settings.RAG_CHUNK_OVERLAP = settings.RAG_CHUNK_OVERLAP + 100
    assert services.skill_index(skill_id=skill.pk).skipped
    assert set(Chunk.objects.values_list("pk", flat=True)) == ids


def test_skills_tools_files_and_datasets_share_one_fingerprint_told_apart_by_their_chunker(tmp_path, settings):
    """Same text, same settings, same model: every kind of document records the one fingerprint of ingest, with the
    identity of the strategy that chunks it (a skill, a markdown file and a plain-text passage are chunked apart)."""
    from measure.evaluation import Dataset, dataset_index
    from sources import tools
    from sources.chunking import chunker_identity, strategy_identity
    from sources.models import IndexedFile, Tool, WorkspaceRoot
    from tests.conftest import index_root

    text = "# Same\n\nOne text indexed four ways.\n"
    skill = SkillFactory(body=text)
    services.skill_index(skill_id=skill.pk)
    (tmp_path / "same.md").write_text(text)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    index_root(WorkspaceRoot.objects.create(name="same", path=str(tmp_path)))
    dataset_index(Dataset(name="same", corpus={"d1": text}, queries={}, qrels={}))
    skill.refresh_from_db()
    file_state = IndexedFile.objects.get(path="same.md")
    passage = IndexedFile.objects.get(path="d1")
    assert skill.content_hash == file_state.content_hash == passage.content_hash
    model = file_state.embedding_model.spec.identity
    config = IngestSettings.current()

    def expected(chunker: str) -> str:
        return fingerprint(content=skill.content_hash, model=model, config=config, chunker=chunker)

    assert skill.fingerprint == expected(strategy_identity("skill"))
    assert file_state.fingerprint == expected(chunker_identity("same.md"))
    assert passage.fingerprint == expected(chunker_identity("d1.txt"))
    assert len({skill.fingerprint, file_state.fingerprint, passage.fingerprint}) == 3
    tool = Tool.objects.create(name="same")
    tools.tool_index(tool_id=tool.pk)
    tool.refresh_from_db()
    model = Source.objects.get(pk=tool.source_id).embedding_model.spec.identity
    assert tool.fingerprint == fingerprint(
        content=tool.content_hash, model=model, config=IngestSettings.current(), chunker=strategy_identity("whole")
    )


def test_an_edit_replaces_all_chunks():
    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    Skill.objects.filter(pk=skill.pk).update(body="# Other\n\nCompletely different.\n")
    outcome = services.skill_index(skill_id=skill.pk)
    assert (outcome.chunks_deleted, outcome.chunks_embedded) == (2, 1)
    assert list(Chunk.objects.values_list("content", flat=True)) == ["# Other\n\nCompletely different."]


def test_a_failure_is_recorded_and_the_old_chunks_stay():
    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    Skill.objects.filter(pk=skill.pk).update(body="---\nname: [broken\n---\n# New\n")
    with pytest.raises(services.IndexingError, match="not valid YAML") as caught:
        services.skill_index(skill_id=skill.pk)
    services.skill_index_failed(skill_id=skill.pk, reason=caught.value.message)
    skill.refresh_from_db()
    assert skill.index_status == IndexStatus.FAILED
    assert "not valid YAML" in skill.last_error
    assert Chunk.objects.filter(source__skill=skill).count() == 2


def test_deleting_a_skill_deletes_its_chunks():
    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    Skill.objects.get(pk=skill.pk).delete()
    assert not Source.objects.exists()
    assert not Chunk.objects.exists()


def test_a_deleted_skill_is_a_quiet_no_op():
    assert services.skill_index(skill_id=987654) is None


def test_a_disabled_skill_is_not_searchable():
    from retrieval.search import Mode, chunks_search

    skill = SkillFactory(body=BODY)
    services.skill_index(skill_id=skill.pk)
    assert chunks_search(query="pg_dump backups", mode=Mode.LEXICAL)
    Skill.objects.filter(pk=skill.pk).update(enabled=False)
    services.skill_index(skill_id=skill.pk)
    assert not chunks_search(query="pg_dump backups", mode=Mode.LEXICAL)


def test_a_disabled_skill_is_listed_but_its_body_is_not_served(key_client):
    skill = SkillFactory(slug="retired", body=BODY)
    services.skill_index(skill_id=skill.pk)
    assert key_client.get("/api/v1/skills/retired").json()["body"] == BODY
    skill.enabled = False
    skill.save()
    detail = key_client.get("/api/v1/skills/retired")
    assert detail.status_code == 404 and detail.json()["error"] == "skill 'retired' is disabled: an admin turned it off"
    assert [(s["slug"], s["enabled"]) for s in key_client.get("/api/v1/skills").json()] == [("retired", False)]


def test_the_admin_form_refuses_nul_and_bad_front_matter_with_a_message():
    from surfaces.admin.skills import SkillForm

    nul = SkillForm(data={"slug": "n", "title": "", "enabled": True, "body": "# T\n\nbad \x00 byte\n"})
    assert not nul.is_valid() and "Null characters are not allowed" in nul.errors["body"][0]
    yaml = SkillForm(data={"slug": "y", "title": "", "enabled": True, "body": "---\nname: [x\n---\n# T\n"})
    assert not yaml.is_valid() and "not valid YAML" in yaml.errors["body"][0]
