"""Indexing memories (sources/memories.py)."""

import pytest

from sources.memories import memory_index
from sources.models import Chunk, Memory

pytestmark = pytest.mark.django_db


def test_new_chunk_settings_re_embed_no_memory(settings):
    """A memory is one chunk as written: no chunk setting is part of its fingerprint."""
    memory = Memory.objects.create(text="The staging database is restored from backup every Monday.")
    assert memory_index(memory_id=memory.pk).skipped is False
    ids = set(Chunk.objects.values_list("pk", flat=True))
    settings.RAG_CHUNK_MAX_CHARS = settings.RAG_CHUNK_MAX_CHARS + 300
    settings.RAG_CHUNK_OVERLAP = settings.RAG_CHUNK_OVERLAP + 100
    assert memory_index(memory_id=memory.pk).skipped is True
    assert set(Chunk.objects.values_list("pk", flat=True)) == ids
