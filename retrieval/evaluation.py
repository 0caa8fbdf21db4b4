"""`rag_eval`: index a BEIR dataset through the real pipeline, query every
channel through the real search service, score them side by side."""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from rag_site.errors import ApplicationError
from retrieval.channels import Scope
from retrieval.metrics import evaluate, token_overlap_rank, tokens
from retrieval.search import Mode, chunks_search
from sources.chunking import CHUNKING_VERSION, chunk_text
from sources.models import IndexedFile, Source
from sources.store import FileChunks, embedding_model_for, files_embed, files_replace

# Documents embedded per call: big calls pad less (see RAG_INDEX_FLUSH_CHUNKS).
_FLUSH = 1024
DEPTH = 100  # every channel ranks this many documents (Recall@100)


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def beir_load(directory: Path) -> Dataset:
    """corpus.jsonl, queries.jsonl and qrels/test.tsv; clear errors for anything missing."""
    paths = {"corpus": directory / "corpus.jsonl", "queries": directory / "queries.jsonl", "qrels": directory / "qrels" / "test.tsv"}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise ApplicationError(f"not a BEIR dataset: missing {', '.join(missing)}")
    corpus = {}
    for number, row in _jsonl(paths["corpus"]):
        if "_id" not in row:
            raise ApplicationError(f"{paths['corpus']}:{number}: a corpus line needs an _id")
        title, text = row.get("title") or "", row.get("text") or ""
        corpus[str(row["_id"])] = f"{title}\n{text}" if title else text
    queries = {str(row["_id"]): row.get("text", "") for _, row in _jsonl(paths["queries"])}
    qrels: dict[str, dict[str, int]] = {}
    for number, line in enumerate(paths["qrels"].read_text(encoding="utf-8").split("\n"), start=1):
        parts = line.split("\t")
        if number == 1 and parts[0] == "query-id" or not line.strip():
            continue
        if len(parts) != 3:
            raise ApplicationError(f"{paths['qrels']}:{number}: expected query-id, corpus-id, score separated by tabs")
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    qrels = {q: rel for q, rel in qrels.items() if q in queries}
    return Dataset(name=directory.name, corpus=corpus, queries=queries, qrels=qrels)


def _jsonl(path: Path):
    # split("\n"), not splitlines(): JSON strings may hold U+2028 and friends.
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except ValueError as exc:
                raise ApplicationError(f"{path}:{number}: not valid JSON: {exc}") from None


def dataset_index(dataset: Dataset) -> tuple[Source, int]:
    """Index the corpus as its own source; unchanged documents are not embedded again.

    Returns the source and how many chunks were embedded.
    """
    model = embedding_model_for()
    source, _ = Source.objects.get_or_create(key=f"dataset:{dataset.name}", defaults={"kind": Source.Kind.DATASET, "title": dataset.name})
    known = dict(IndexedFile.objects.filter(source=source, generation=0).values_list("path", "content_hash"))
    batch: list[FileChunks] = []
    embedded = 0

    def flush() -> None:
        nonlocal batch, embedded
        if batch:
            files_embed(batch, model=model)
            files_replace(batch, model=model, track_state=True)
            embedded += sum(len(f.chunks) for f in batch)
            batch = []

    for doc_id, text in dataset.corpus.items():
        digest = hashlib.sha256(f"{CHUNKING_VERSION}\x1f{model.spec.identity}\x1f{text}".encode()).hexdigest()
        if known.get(doc_id) == digest:
            continue
        chunks = chunk_text(text, f"{doc_id}.txt", max_chars=settings.RAG_CHUNK_MAX_CHARS, overlap=settings.RAG_CHUNK_OVERLAP)
        batch.append(FileChunks(source=source, generation=0, path=doc_id, chunks=chunks, size=len(text), content_hash=digest))
        if sum(len(f.chunks) for f in batch) >= _FLUSH:
            flush()
    flush()
    gone = set(known) - set(dataset.corpus)
    if gone:
        source.chunks.filter(path__in=gone).delete()
        IndexedFile.objects.filter(source=source, path__in=gone).delete()
    Source.objects.filter(pk=source.pk).update(embedding_model=model, active_generation=0)
    source.refresh_from_db()
    return source, embedded


def dataset_evaluate(dataset: Dataset, source: Source, *, k: int = 10) -> dict[str, dict[str, float]]:
    """One row per channel, all from this run."""
    scope = Scope(kinds=(Source.Kind.DATASET,), source_ids=(source.pk,))
    documents = {doc: tokens(text) for doc, text in dataset.corpus.items()}
    channels: dict[str, Callable[[str], list[str]]] = {
        "token-overlap": lambda q: token_overlap_rank(q, documents, limit=DEPTH),
        "lexical": lambda q: _documents(q, Mode.LEXICAL, scope),
        "vector": lambda q: _documents(q, Mode.VECTOR, scope),
        "fused": lambda q: _documents(q, Mode.HYBRID, scope),
    }
    judged = {q: text for q, text in dataset.queries.items() if q in dataset.qrels}
    return {name: evaluate({q: rank(text) for q, text in judged.items()}, dataset.qrels, k=k) for name, rank in channels.items()}


def _documents(query: str, mode: Mode, scope: Scope) -> list[str]:
    # A document ranks where its best chunk ranks.
    seen: dict[str, None] = {}
    for hit in chunks_search(query=query, k=DEPTH, mode=mode, scope=scope):
        seen.setdefault(hit.chunk.path, None)
    return list(seen)
