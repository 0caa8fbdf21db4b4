"""Deleting a large root leaves the lexical index exactly as if the root had never been indexed.

The delete trigger (retrieval migration 0005) takes an emptied source
generation's postings by their key's prefix and the other deleted chunks'
postings by their whole key; document frequencies and lengths are
subtracted either way. These tests compare the index after the deletion
with the one a database that only ever held the other root has, and with
the index recomputed from the chunks alone.
"""

import pytest

from sources.models import Chunk, EmbeddingModel, FileText, IndexedFile, Segment, Source, WorkspaceRoot
from tests.retrieval.test_lexical_index import WORDS, assert_index_matches_chunks, chunks, index_rows, text

pytestmark = pytest.mark.django_db

VOCABULARY = [f"{word}{n}" for word in WORDS for n in range(40)]  # 640 words: thousands of postings per common word


def long_text(seed: int) -> str:
    # Words shared with the other root (so their document frequencies mix) and words of this root's own.
    return text(seed, length=10) + " " + " ".join(VOCABULARY[(seed * 31 + j * 17) % len(VOCABULARY)] for j in range(20))


def root_with_files(tmp_path, name: str, *, files: int, chunks_per_file: int, segment: bool) -> WorkspaceRoot:
    (tmp_path / name).mkdir()
    root = WorkspaceRoot.objects.create(name=name, path=str(tmp_path / name), cooldown_seconds=0, watch=False)
    if segment:
        Segment.objects.create(root=root, name="docs", path_glob="docs/**")
    model, _ = EmbeddingModel.objects.get_or_create(name="test-model", dimensions=3)
    for source in Source.objects.filter(root=root).order_by("pk"):
        prefix = "docs/" if source.pk != root.source_id else "src/"
        for number in range(files):
            path = f"{prefix}{name}/{number}.py"
            seed = hash((name, source.pk, number)) % 10_000
            made = Chunk.objects.bulk_create(
                Chunk(
                    source=source,
                    path=path,
                    chunk_index=i,
                    content=long_text(seed + i),
                    symbol=f"Symbol{i}",
                    start_line=i,
                    end_line=i,
                    content_hash=str(i),
                    chunking_version="test",
                )
                for i in range(chunks_per_file)
            )
            IndexedFile.objects.create(
                source=source,
                path=path,
                size=1,
                mtime_ns=1,
                content_hash="h",
                chunking_version="test",
                embedding_model=model,
                chunk_count=len(made),
            )
            FileText.objects.create(source=source, path=path, text="\n".join(c.content for c in made))
    return root


def test_deleting_a_root_of_thousands_of_chunks_leaves_the_other_roots_index_as_it_was(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    kept = root_with_files(tmp_path, "kept", files=20, chunks_per_file=10, segment=False)
    only_kept = index_rows()  # the index of a database that only ever held this root
    gone = root_with_files(tmp_path, "gone", files=150, chunks_per_file=20, segment=True)  # 2 sources, 6,000 chunks
    gone_sources = list(Source.objects.filter(root=gone).values_list("pk", flat=True))
    assert Chunk.objects.filter(source_id__in=gone_sources).count() == 6000
    assert index_rows() != only_kept

    gone.delete()

    assert index_rows() == only_kept  # postings, document frequencies, chunk counts and lengths alike
    assert_index_matches_chunks()
    assert not Source.objects.filter(pk__in=gone_sources).exists()
    for model in (Chunk, IndexedFile, FileText):
        assert not model.objects.filter(source_id__in=gone_sources).exists(), model.__name__
    assert Chunk.objects.filter(source_id=kept.source_id).count() == 200
    assert FileText.objects.filter(source_id=kept.source_id).count() == 20


def test_one_statement_emptying_one_generation_and_thinning_another_keeps_the_index_exact():
    a, b = (Source.objects.create(kind=Source.Kind.FILE, key=key, title=key) for key in ("a", "b"))
    old = chunks(a, [long_text(i) for i in range(300)], generation=0)
    chunks(a, [long_text(i + 300) for i in range(300)], generation=1)
    thinned = chunks(b, [long_text(i + 600) for i in range(300)])
    # Generation 0 of a goes whole, b loses every other chunk, generation 1 of a is untouched.
    Chunk.objects.filter(pk__in=[c.pk for c in old] + [c.pk for c in thinned[::2]]).delete()
    assert_index_matches_chunks()
    Chunk.objects.filter(source=b).update(source=a, generation=1)  # b emptied by a move
    assert_index_matches_chunks()
    Chunk.objects.filter(source=a, generation=1, chunk_index__lt=100).update(content="glacier fjord")  # rewritten
    assert_index_matches_chunks()
    a.delete()
    assert index_rows() == (set(), set(), set())
