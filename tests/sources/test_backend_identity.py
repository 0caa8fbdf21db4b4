"""Switching RAG_EMBEDDING_BACKEND re-embeds through the model switch; vectors of two backends never mix."""

import pytest

from retrieval.search import Mode, chunks_search
from sources import services
from sources.models import Chunk, EmbeddingModel, JobStatus, Source, WorkspaceRoot
from tests.conftest import index_root
from tests.factories import SkillFactory

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def root(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    directory = tmp_path / "repo"
    directory.mkdir()
    (directory / "birds.py").write_text("def pelican_feeder():\n    return 'fish'\n")
    (directory / "notes.md").write_text("# Herons\n\nHerons wade in shallow water.\n")
    return WorkspaceRoot.objects.create(name="repo", path=str(directory), cooldown_seconds=0)


def models_of(root: WorkspaceRoot) -> set[str]:
    return set(
        Chunk.objects.filter(source__key__startswith=f"root:{root.pk}").values_list("embedding_model__name", flat=True)
    )


def test_a_backend_switch_rebuilds_a_root_beside_its_vectors_and_flips_to_the_new_model(root, settings):
    settings.RAG_SIMILARITY_THRESHOLD_FILE = -1.0
    settings.RAG_EMBEDDING_BACKEND = "torch"  # as an installation indexed before onnx became the default
    assert index_root(root, force=False).status == JobStatus.SUCCEEDED
    assert models_of(root) == {"all-MiniLM-L6-v2"}

    settings.RAG_EMBEDDING_BACKEND = "onnx"
    switched = index_root(root, force=False)
    assert switched.status == JobStatus.SUCCEEDED, switched.message
    assert switched.chunks_embedded == Chunk.objects.filter(source__key__startswith=f"root:{root.pk}").count() > 0
    assert models_of(root) == {"all-MiniLM-L6-v2#onnx"}  # every chunk, none left from torch
    source = Source.objects.get(pk=root.source_id)
    assert source.active_generation == 1 and source.embedding_model.name == "all-MiniLM-L6-v2#onnx"
    hits = chunks_search(query="feeding pelicans", mode=Mode.VECTOR)
    assert hits[0].chunk.path == "birds.py" and hits[0].chunk.embedding_model.name == "all-MiniLM-L6-v2#onnx"

    assert index_root(root, force=False).chunks_embedded == 0  # unchanged under the same backend: nothing re-embedded
    settings.RAG_EMBEDDING_BACKEND = "torch"
    assert index_root(root, force=False).status == JobStatus.SUCCEEDED
    assert models_of(root) == {"all-MiniLM-L6-v2"}
    assert set(EmbeddingModel.objects.values_list("name", flat=True)) >= {"all-MiniLM-L6-v2", "all-MiniLM-L6-v2#onnx"}


def test_a_skill_re_embeds_when_the_backend_changes(settings):
    skill = SkillFactory(body="# Deploy\n\nShip it with docker compose.\n")
    services.skill_index(skill_id=skill.pk)
    settings.RAG_EMBEDDING_BACKEND = "onnx-int8"
    assert services.skill_index(skill_id=skill.pk).chunks_embedded == 1
    chunk = Chunk.objects.get(source__skill=skill)
    assert chunk.embedding_model.spec.identity == "local:all-MiniLM-L6-v2#onnx-int8:384:norm"
    assert services.skill_index(skill_id=skill.pk).skipped
