"""`rag_eval`: index a BEIR dataset through the real pipeline, query every
channel through the real search service, score them side by side."""

import ast
import functools
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from django.conf import settings

from access.scope import Scope
from kernel.errors import ApplicationError
from measure.metrics import evaluate, token_overlap_rank, tokens
from retrieval.assembly import Span, assemble
from retrieval.choices import RerankBackend
from retrieval.confidence import best_similarity, lexical_found
from retrieval.config import ContextConfig, SearchConfig
from retrieval.context import context_floored, context_pieces, context_search
from retrieval.query_language import words_only
from retrieval.search import Mode, chunks_search
from retrieval.tokens import ENCODINGS, token_count
from sources.chunking import chunk_text, chunker_identity
from sources.config import indexing_config
from sources.ingest import Batch, Document, content_hash, embedding_model_for, fingerprint
from sources.models import IndexedFile, Source, unowned_source_key

# Documents embedded per call: big calls pad less (see RAG_INDEX_FLUSH_CHUNKS).
_FLUSH = 1024
DEPTH = 100  # every channel ranks this many documents (Recall@100)
# The context metric: budgets a bot might give /api/v1/context, and the
# evidence chunks it considers (the API's largest k), so the budget, not k,
# decides what fits.
CONTEXT_BUDGETS = (1000, 2000, 4000)
CONTEXT_CANDIDATES = 50
# The context's relevance floors compared side by side (RAG_CONTEXT_MIN_SIMILARITY): every kind's hits below one
# are left out; -1 keeps everything (the floor files had before issue 41).
CONTEXT_FLOORS = (-1.0, 0.1, 0.2, 0.25, 0.3, 0.35, 0.4)
# Margins below the closest hit (retrieval/context.py, context_floored) compared at the configured floor; reported
# in ``by_floor`` as "<floor>+<margin>".
CONTEXT_MARGINS = (0.0, 0.05, 0.1, 0.15, 0.2)


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def beir_load(directory: Path) -> Dataset:
    """corpus.jsonl, queries.jsonl and qrels/test.tsv; clear errors for anything missing."""
    paths = {
        "corpus": directory / "corpus.jsonl",
        "queries": directory / "queries.jsonl",
        "qrels": directory / "qrels" / "test.tsv",
    }
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
    """Index the corpus as its own source through the one ingest path; unchanged documents are not embedded again.

    Returns the source and how many chunks were embedded.
    """
    indexing = indexing_config()
    model = embedding_model_for(config=indexing.embedding)
    config = indexing.ingest
    source, _ = Source.objects.get_or_create(
        key=unowned_source_key("dataset", dataset.name), defaults={"kind": Source.Kind.DATASET, "title": dataset.name}
    )
    known = dict(IndexedFile.objects.filter(source=source, generation=0).values_list("path", "fingerprint"))
    batch = Batch(track_files=True, config=indexing, flush_chunks=_FLUSH)
    for doc_id, text in dataset.corpus.items():
        digest = content_hash(text)
        chunker = chunker_identity(f"{doc_id}.txt")  # a passage is plain text, whatever its id looks like
        stored = fingerprint(content=digest, model=model.spec.identity, config=config, chunker=chunker)
        if known.get(doc_id) == stored:
            continue
        chunks = chunk_text(text, f"{doc_id}.txt", max_chars=config.max_chars, overlap=config.overlap)
        batch.add(
            Document(
                source=source,
                generation=0,
                path=doc_id,
                chunks=chunks,
                model=model,
                chunker=chunker,
                content_hash=digest,
                fingerprint=stored,
                size=len(text),
            )
        )
    batch.flush()
    gone = set(known) - set(dataset.corpus)
    if gone:
        source.chunks.filter(path__in=gone).delete()
        IndexedFile.objects.filter(source=source, path__in=gone).delete()
    Source.objects.filter(pk=source.pk).update(embedding_model=model, active_generation=0)
    source.refresh_from_db()
    return source, batch.embedded


def dataset_evaluate(dataset: Dataset, source: Source, *, k: int = 10) -> dict[str, dict[str, float]]:
    """One row per channel, all from this run."""
    scope = Scope(kinds=(Source.Kind.DATASET,), source_ids=(source.pk,))
    documents = {doc: tokens(text) for doc, text in dataset.corpus.items()}
    channels: dict[str, Callable[[str], list[str]]] = {
        "token-overlap": lambda q: token_overlap_rank(q, documents, limit=DEPTH)
    }
    for name, options in search_rows().items():
        channels[name] = functools.partial(_documents, scope=scope, options=options)
    judged = {q: text for q, text in dataset.queries.items() if q in dataset.qrels}
    return {
        name: evaluate({q: rank(text) for q, text in judged.items()}, dataset.qrels, k=k)
        for name, rank in channels.items()
    }


def dataset_context(dataset: Dataset, source: Source) -> dict[str, float]:
    """Per budget, over the judged queries: ``context``, the share with a relevant passage inside the assembled
    context; ``best``, the share with a passage of the query's best grade inside (TREC's queries have dozens of
    relevant passages, so one of them is nearly always in); ``recall``, the share of each query's relevant
    passages inside, averaged.
    """
    scope = Scope(kinds=(Source.Kind.DATASET,), source_ids=(source.pk,))
    judged = [(q, text) for q, text in dataset.queries.items() if q in dataset.qrels]

    def inside(query_id: str, spans: list[tuple[str, int, int]]) -> dict[str, float]:
        grades = dataset.qrels[query_id]
        best = max(grades.values())
        relevant = {doc for doc, grade in grades.items() if grade > 0}
        shown = {path for path, _, _ in spans}
        return {
            "context": float(bool(relevant & shown)),
            "best": float(best > 0 and any(grades.get(doc) == best for doc in shown)),
            "recall": len(relevant & shown) / len(relevant) if relevant else 0.0,
        }

    return _context_coverage([(text, functools.partial(inside, q)) for q, text in judged], scope, Source.Kind.DATASET)


def _context_coverage(
    queries: list[tuple[str, Callable[[list[tuple[str, int, int]]], dict[str, float]]]], scope: Scope, kind: str
) -> dict:
    """``{"<metric>@<budget>": mean}`` of what ``inside`` says of each query's context at RAG_CONTEXT_MIN_SIMILARITY:
    one search per query, assembled at every budget.

    Also ``tokens/<encoding>``: the largest budget's texts counted in each
    other encoding, over their count in RAG_CONTEXT_TOKENIZER (how far a
    budget is off for a model with another tokenizer); and ``by_floor``: per
    floor of CONTEXT_FLOORS, the same metrics at every budget, the share
    of these queries left with no evidence at all (``empty``) and the share of
    GIBBERISH_QUERIES generated ones that are (``gibberish_empty``: noise kept
    out).
    """
    config = ContextConfig.from_settings()

    def configured_count(text: str) -> int:
        return token_count(text, encoding=config.tokenizer)

    chosen = (config.min_similarity, config.margin)
    rules = sorted(
        {(f, 0.0) for f in CONTEXT_FLOORS} | {(config.min_similarity, m) for m in CONTEXT_MARGINS} | {chosen}
    )
    sums: dict[str, float] = {}
    by_rule: dict[tuple[float, float], dict[str, float]] = {rule: {} for rule in rules}
    texts = []
    for text, inside in queries:
        hits, warnings = context_search(
            query=words_only(text), scope=scope, k={kind: CONTEXT_CANDIDATES}, config=config.search
        )
        _skipped.extend(warnings[:1])
        for rule in rules:
            floor, margin = rule
            skills, spans = context_pieces(context_floored(hits, floor=floor, margin=margin)[0], query=text)
            for budget in CONTEXT_BUDGETS:
                assembled = assemble(skills, spans, budget=budget, count=configured_count)
                shown = [kept for part in assembled.parts if isinstance(part.item, Span) for kept in _kept(part.item)]
                for metric, value in inside(shown).items():
                    name = f"{metric}@{budget // 1000}k"
                    if rule == chosen:
                        sums[name] = sums.get(name, 0.0) + value
                    by_rule[rule][name] = by_rule[rule].get(name, 0.0) + value
                if rule == chosen:
                    final = assembled.text
            by_rule[rule]["empty"] = by_rule[rule].get("empty", 0.0) + float(not spans)
        texts.append(final)
    report: dict = {name: total / max(len(queries), 1) for name, total in sums.items()}
    configured = sum(configured_count(t) for t in texts) or 1
    for encoding in ENCODINGS:
        if encoding != config.tokenizer:
            report[f"tokens/{encoding}"] = sum(token_count(t, encoding=encoding) for t in texts) / configured
    gibberish = [
        context_search(query=words_only(text), scope=scope, k={kind: CONTEXT_CANDIDATES}, config=config.search)[0]
        for text in gibberish_queries()
    ]
    report["floor"] = config.min_similarity
    report["margin"] = config.margin
    report["by_floor"] = {
        _rule_name(rule): {
            **{name: round(total / max(len(queries), 1), 4) for name, total in by_rule[rule].items()},
            "gibberish_empty": round(
                sum(not any(context_floored(found, floor=rule[0], margin=rule[1])[0].values()) for found in gibberish)
                / GIBBERISH_QUERIES,
                4,
            ),
        }
        for rule in rules
    }
    return report


def _rule_name(rule: tuple[float, float]) -> str:
    floor, margin = rule
    return f"{floor:g}" if margin == 0 else f"{floor:g}+{margin:g}"


def _kept(span: Span) -> list[tuple[str, int, int]]:
    """The line ranges a span shows: all of them, or head and tail around the lines compaction left out."""
    if span.omitted is None:
        return [(span.path, span.start_line, span.end_line)]
    first_gone, last_gone = span.omitted
    return [(span.path, span.start_line, first_gone - 1), (span.path, last_gone + 1, span.end_line)]


# What the searches of this run skipped (a channel timed out or failed): numbers from such a run are not
# the service's, so the command says so (``skipped_take``).
_skipped: list[str] = []


def _searched(**options):
    result = chunks_search(**options)
    _skipped.extend(result.warnings[:1])
    return result


def skipped_take() -> list[str]:
    """The first warning of every search since the last call that had one (and forget them)."""
    taken = list(_skipped)
    _skipped.clear()
    return taken


def search_rows() -> dict[str, dict]:
    """The search service's configurations scored side by side; each reranker only when it is configured.

    ``fused+rerank``: the cross-encoder (RAG_RERANK_MODEL); ``fused+llm-rerank``:
    the language model (RAG_RERANK_BACKEND=llm with RAG_LLM_*). Contextual
    descriptions (RAG_CONTEXTUAL_RETRIEVAL) are part of indexing: every row
    then searches the described chunks (``indexing_notes`` says so).
    """
    config = SearchConfig.from_settings()
    rows = {
        "lexical": {"mode": Mode.LEXICAL, "rerank": False, "config": config},
        "vector": {"mode": Mode.VECTOR, "rerank": False, "config": config},
        "fused": {"mode": Mode.HYBRID, "rerank": False, "config": config},
        # The fused row as it was before issue 29: one lexical weight for every query, no code preferences.
        "fused-1w": {"mode": Mode.HYBRID, "rerank": False, "config": replace(config, by_query=False)},
        "fused+mmr": {"mode": Mode.HYBRID, "rerank": False, "mmr": True, "config": config},
    }
    if config.vector_feedback:
        # Both channels' rows as they were before the vector channel's feedback (issue 29).
        unfed = replace(config, vector_feedback=False)
        rows["vector-nofb"] = {"mode": Mode.VECTOR, "rerank": False, "config": unfed}
        rows["fused-nofb"] = {"mode": Mode.HYBRID, "rerank": False, "config": unfed}
        # The fused row before the lexical channel's first hits joined that feedback (issue 29, stop 36).
        rows["fused-nolexfb"] = {
            "mode": Mode.HYBRID,
            "rerank": False,
            "config": replace(config, lexical_feedback=False),
        }
    if settings.RAG_RERANK_MODEL:
        cross_encoder = replace(config, rerank=replace(config.rerank, backend=RerankBackend.CROSS_ENCODER))
        rows["fused+rerank"] = {"mode": Mode.HYBRID, "rerank": True, "config": cross_encoder}
    if settings.RAG_RERANK_BACKEND == RerankBackend.LLM:
        rows["fused+llm-rerank"] = {
            "mode": Mode.HYBRID,
            "rerank": True,
            "config": replace(config, rerank=replace(config.rerank, backend=RerankBackend.LLM)),
        }
    return rows


def indexing_notes() -> list[str]:
    """What indexing did beyond chunking and embedding, for the report (empty: nothing)."""
    identity = indexing_config().ingest.contextual
    return [f"contextual retrieval on: every chunk described by {identity} before embedding"] if identity else []


def _documents(query: str, scope: Scope, options: dict) -> list[str]:
    # A document ranks where its best chunk ranks.
    seen: dict[str, None] = {}
    for hit in _searched(query=query, k=DEPTH, scope=scope, **options):
        seen.setdefault(hit.chunk.path, None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class CodeQuery:
    text: str
    path: str
    start_line: int
    end_line: int


def code_queries_load(path: Path, *, root: Path | None = None) -> list[CodeQuery]:
    """The queries of ``path``; with ``root``, a query that names its ``symbol`` in a Python file takes that
    definition's lines as the file under ``root`` has them (a set written for one version of a package stays right
    when the next moves its code), and a symbol the file lacks is an error. A bare name (make_code_eval.py's
    ``symbol``) is any definition of that name. A definition that still starts at the query's first line keeps the
    query's lines; one that moved is followed to the nearest definition of the name."""
    if not path.is_file():
        raise ApplicationError(f"{path} does not exist (make it with make_code_eval.py PACKAGE OUT_DIR)")
    queries = []
    for number, row in _jsonl(path):
        try:
            query = CodeQuery(row["text"], row["path"], int(row["start_line"]), int(row["end_line"]))
        except (KeyError, TypeError, ValueError):
            raise ApplicationError(f"{path}:{number}: a query needs text, path, start_line and end_line") from None
        symbol = row.get("symbol")
        if root is not None and symbol and query.path.endswith(".py"):
            found = symbol_lines(root / query.path, symbol)
            if not found:
                raise ApplicationError(
                    f"{path}:{number}: {symbol} is not defined in {root / query.path} (a different version of the "
                    "code than the queries were written for?)"
                )
            if all(start != query.start_line for start, _ in found):  # moved: follow it
                start, end = min(found, key=lambda lines: abs(lines[0] - query.start_line))
                query = replace(query, start_line=start, end_line=end)
        queries.append(query)
    return queries


def symbol_lines(file: Path, symbol: str) -> list[tuple[int, int]]:
    """The first line (decorators included) and the last of each class or function ``symbol`` names in ``file``:
    a dotted name (``Class.method``) is that one definition, a bare name any definition of it at any depth. Empty
    when the file is missing, not Python or has none."""
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return []
    kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    if "." not in symbol:
        nodes = [node for node in ast.walk(tree) if isinstance(node, kinds) and node.name == symbol]
    else:
        body, nodes = tree.body, []
        for name in symbol.split("."):
            nodes = [item for item in body if isinstance(item, kinds) and item.name == name][:1]
            if not nodes:
                return []
            body = nodes[0].body
    return [
        (min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.end_lineno or node.lineno) for node in nodes
    ]


def code_root_index(directory: Path):
    """Register ``directory`` as a workspace root and index it in this process."""
    from sources import jobs, pipeline, roots
    from sources.models import IndexJob, JobStatus, WorkspaceRoot

    if not directory.is_dir():
        raise ApplicationError(f"{directory} is not a directory")
    path = roots.root_path_validate(str(directory.resolve()))  # under RAG_ROOT_BASE_DIRS, like every root
    root, _ = WorkspaceRoot.objects.get_or_create(
        path=path, defaults={"name": f"eval {directory.resolve()}", "reverify_minutes": 0, "cooldown_seconds": 0}
    )
    # Not forced: a root kept from an earlier run (--keep) embeds only what changed.
    job = jobs.job_start(job_id=IndexJob.objects.create(root=root, trigger="eval").pk)
    if job is None:  # another process holds the root's lock (a second eval of the same directory)
        raise ApplicationError(f"indexing {directory} did not start: another job is indexing it")
    pipeline.root_index(job=job)
    job.refresh_from_db()
    if job.status != JobStatus.SUCCEEDED:
        raise ApplicationError(f"indexing {directory} failed: {job.message}")
    return root, job


def code_evaluate(queries: list[CodeQuery], root, *, k: int = 10) -> dict[str, dict[str, float]]:
    """A hit is correct when its file is the query's and its lines overlap the query's."""
    from measure.metrics import hit_metrics
    from sources.models import Chunk

    source_ids = _root_source_ids(root)
    scope = Scope(kinds=(Source.Kind.FILE,), source_ids=source_ids)
    rows = list(Chunk.objects.filter(source_id__in=source_ids).values_list("path", "start_line", "end_line", "content"))
    chunk_tokens = [(row[:3], tokens(f"{row[0]} {row[3]}")) for row in rows]

    def overlap(query: CodeQuery) -> list[tuple[str, int, int]]:
        wanted = tokens(query.text)
        scored = sorted(
            ((len(wanted & words) / len(wanted), where) for where, words in chunk_tokens if wanted & words),
            key=lambda pair: (-pair[0], pair[1]),
        )
        return [where for _, where in scored[:k]]

    def search(options: dict) -> Callable[[CodeQuery], list[tuple[str, int, int]]]:
        return lambda q: [
            (h.chunk.path, h.chunk.start_line, h.chunk.end_line)
            for h in _searched(query=q.text, k=k, scope=scope, **options)
        ]

    channels = {"token-overlap": overlap, **{name: search(options) for name, options in search_rows().items()}}
    report = {}
    for name, rank in channels.items():
        firsts = []
        for query in queries:
            found = rank(query)
            firsts.append(
                next(
                    (
                        i
                        for i, (path, start, end) in enumerate(found, start=1)
                        if path == query.path and start <= query.end_line and end >= query.start_line
                    ),
                    None,
                )
            )
        report[name] = hit_metrics(firsts, k=k)
    return report


def code_context(queries: list[CodeQuery], root) -> dict[str, float]:
    """Per budget: the share of queries whose function (file and overlapping lines) is inside the assembled context."""
    source_ids = _root_source_ids(root)
    scope = Scope(kinds=(Source.Kind.FILE,), source_ids=source_ids)

    def inside(query: CodeQuery, spans: list[tuple[str, int, int]]) -> dict[str, float]:
        return {
            "context": float(
                any(
                    path == query.path and start <= query.end_line and end >= query.start_line
                    for path, start, end in spans
                )
            )
        }

    return _context_coverage([(q.text, functools.partial(inside, q)) for q in queries], scope, Source.Kind.FILE)


def _root_source_ids(root) -> tuple[int, ...]:
    from sources.roots import root_sources

    ids = tuple(root_sources(root).values_list("pk", flat=True))
    if not ids:  # an empty tuple would scope the search to every source
        raise ApplicationError(f"root {root.name!r} has no indexed sources")
    return ids


# The no-good-match section: how often real development queries and generated gibberish are called "no good match"
# at the configured line and around it (retrieval/confidence.py).
GIBBERISH_QUERIES = 50
CONFIDENCE_FLOORS = (0.3, 0.35, 0.4, 0.45, 0.5)


def gibberish_queries(count: int = GIBBERISH_QUERIES, *, seed: int = 29) -> list[str]:
    """``count`` pronounceable non-words, one to four per query ("kezuva mipo"): what a person types by mistake or
    to test the service; the same list every run."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(rng.randint(2, 4)))

    return [" ".join(word() for _ in range(rng.randint(1, 4))) for _ in range(count)]


def match_confidence(real: list[str], scope: Scope) -> dict:
    """The share of ``real`` queries and of the gibberish ones that the page would call "no good match", at
    RAG_SEARCH_GOOD_MATCH_SIMILARITY (``configured``) and at each of CONFIDENCE_FLOORS (``by_floor``)."""
    config = SearchConfig.from_settings()

    def evidence(queries: list[str]) -> list[tuple[bool, float]]:
        found = []
        for query in queries:
            hits = list(_searched(query=query, k=10, scope=scope, mode=Mode.HYBRID, rerank=False, config=config))
            found.append((lexical_found(hits), best_similarity(hits)))
        return found

    real_found, gibberish_found = evidence(real), evidence(gibberish_queries())

    def flagged(found: list[tuple[bool, float]], floor: float) -> float:
        return round(sum(1 for lexical, best in found if not lexical and best < floor) / (len(found) or 1), 4)

    configured = settings.RAG_SEARCH_GOOD_MATCH_SIMILARITY
    return {
        "floor": configured,
        "real_flagged": flagged(real_found, configured),
        "gibberish_flagged": flagged(gibberish_found, configured),
        "gibberish_with_a_shared_word": round(sum(lexical for lexical, _ in gibberish_found) / GIBBERISH_QUERIES, 4),
        "by_floor": {
            f"{floor:g}": {"real": flagged(real_found, floor), "gibberish": flagged(gibberish_found, floor)}
            for floor in CONFIDENCE_FLOORS
        },
    }


def dataset_confidence(dataset: Dataset, source: Source) -> dict:
    judged = [text for q, text in dataset.queries.items() if q in dataset.qrels]
    return match_confidence(judged, Scope(kinds=(Source.Kind.DATASET,), source_ids=(source.pk,)))


def code_confidence(queries: list[CodeQuery], root) -> dict:
    return match_confidence(
        [query.text for query in queries], Scope(kinds=(Source.Kind.FILE,), source_ids=_root_source_ids(root))
    )
