"""The corpus's config: built from the settings at call time, then the only thing indexing reads."""

from dataclasses import replace

import numpy as np
import pytest

from sources import ingest
from sources.chunking import ChunkResult
from sources.config import indexing_config, ingest_settings, jobs_config
from sources.models import Source

LONG = " ".join(f"pelican{i} flock{i}" for i in range(60))  # far over the model's 256 word pieces


@pytest.mark.unit
def test_the_builders_read_the_settings_when_called(settings):
    settings.RAG_CHUNK_MAX_CHARS, settings.RAG_JOB_MAX_ATTEMPTS = 900, 7
    settings.RAG_EMBED_LONG_TEXTS = "pieces"
    assert ingest_settings().max_chars == indexing_config().ingest.max_chars == 900
    assert indexing_config().ingest.long_texts == "pieces"
    assert jobs_config().max_attempts == 7


@pytest.mark.django_db
def test_long_texts_are_embedded_as_the_fingerprints_config_says_whatever_the_settings_say_now(settings):
    settings.RAG_EMBED_LONG_TEXTS = "truncate"
    truncate = indexing_config()
    pieces = replace(truncate, ingest=replace(truncate.ingest, long_texts="pieces"))
    model = ingest.embedding_model_for(config=truncate.embedding)
    source = Source(key="test:config", kind=Source.Kind.DATASET)

    def embedded(config) -> np.ndarray:
        chunk = ChunkResult(content=LONG, context_prefix="", language="text", symbol="", start_line=1, end_line=1)
        document = ingest.Document(
            source=source, generation=0, path="long.txt", chunks=[chunk], model=model, chunker="window:1"
        )
        ingest.documents_embed([document], config=config)
        assert document.vectors is not None
        return document.vectors[0]

    truncated = embedded(truncate)
    settings.RAG_EMBED_LONG_TEXTS = "pieces"  # read once, into the config that also makes the fingerprint
    assert embedded(truncate) == pytest.approx(truncated, abs=1e-5)
    assert embedded(pieces) != pytest.approx(truncated, abs=1e-3)
